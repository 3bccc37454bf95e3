//! The command line: every flag as a clap derive, turned into a [`Config`].
//! The defaults the help shows are config's constants; the man page and
//! shell completions can be generated from `Cli::command()`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::builder::NonEmptyStringValueParser;
use clap::{CommandFactory, FromArgMatches, Parser};

use crate::config::{self, Bind, Config, LogFormat, PrettyUrls, Privileges};
use crate::site;

/// The end of `--help`: what most people run. Every flag can also be set by
/// its environment variable (shown beside it); a flag wins over one.
const EXAMPLES: &str = "\
Examples:
  # ./www on port 8080, with listings for directories without an index
  staticd -r www -p 8080 --listing
  # the same, from the environment (a container, a systemd unit)
  STATICD_ROOT=www STATICD_PORT=8080 STATICD_LISTING=1 staticd
  # on loopback only, JSON access log, a health path for a balancer
  staticd -r /srv/www -b 127.0.0.1 --log-format json --health-path /healthz
  # HTTPS on 443, with http:// on 80 redirected to it
  staticd -r /srv/www -p 443 --tls-cert cert.pem --tls-key key.pem --redirect-http 80
  # one process per connection, under tcpserver
  tcpserver 0 8080 staticd --inetd -r www

A flag on the command line wins over its STATICD_* variable. On/off variables
take 1/0, true/false, yes/no or on/off; empty is off.";

/// A small, very fast static-file web server: standalone, or one connection
/// on stdin/stdout under tcpserver, tcpsvd, inetd or systemd.
#[derive(Parser, Debug)]
#[command(name = "staticd", version, about, after_help = EXAMPLES)]
#[cfg_attr(
    feature = "tls",
    command(group(clap::ArgGroup::new("certificates").multiple(true)))
)]
#[cfg_attr(
    feature = "acme",
    command(group(clap::ArgGroup::new("acme_names").multiple(true)))
)]
pub struct Cli {
    /// Document root to serve.
    #[arg(long, short = 'r', env = "STATICD_ROOT", help_heading = "Serving", value_name = "DIR", default_value = config::ROOT)]
    root: PathBuf,

    /// Port to listen on in standalone mode (0 picks a free port).
    #[arg(long, short = 'p', env = "STATICD_PORT", help_heading = "Serving", value_name = "N", default_value_t = config::PORT)]
    port: u16,

    /// Where to listen: an IP address, a host name (every address it
    /// resolves to) or unix:PATH (a Unix-domain socket); repeat for several.
    /// Default: all IPv4 and IPv6 addresses.
    #[arg(
        long,
        short = 'b',
        env = "STATICD_BIND",
        help_heading = "Serving",
        value_name = "ADDR"
    )]
    bind: Vec<Bind>,

    /// Permissions of the --bind unix: socket files, in octal.
    #[arg(long, env = "STATICD_UNIX_MODE", help_heading = "Serving", value_name = "MODE", default_value = config::UNIX_MODE, value_parser = config::parse_mode)]
    unix_mode: u32,

    /// Share the --bind addresses with a staticd already listening there
    /// (SO_REUSEPORT), to take over from it for a restart without a refused
    /// connection (docs/production.md, "Zero-downtime restart"). Without it, an address
    /// in use is an error.
    #[arg(long, env = "STATICD_REUSE_PORT", help_heading = "Production", value_parser = switch, conflicts_with = "inetd")]
    reuse_port: bool,

    /// Worker threads in standalone mode. Default: the number of cores.
    #[arg(long, env = "STATICD_THREADS", help_heading = "Limits", value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: Option<u16>,

    /// Most connections open at once (standalone); at the bound the oldest
    /// idle one is closed to make room, and with none idle new clients wait
    /// in the listen queue. Default: what the descriptor limit leaves room for.
    #[arg(long, env = "STATICD_MAX_CONNECTIONS", help_heading = "Limits", value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_connections: Option<u32>,

    /// Most connections open at once from one client address (standalone;
    /// IPv6 by --ipv6-prefix); more are refused (503, or closed). Loopback
    /// clients and --trusted-proxy peers are not counted. 0: no bound.
    #[arg(long, env = "STATICD_MAX_CONNECTIONS_PER_IP", help_heading = "Limits", value_name = "N", default_value_t = config::MAX_CONNECTIONS_PER_IP)]
    max_connections_per_ip: u32,

    /// Count loopback clients (127.0.0.0/8, ::1) for --max-connections-per-ip
    /// too. Without it they are not counted: a benchmark or a proxy on the
    /// same machine brings every client from one address.
    #[arg(long, env = "STATICD_PER_IP_LOOPBACK", help_heading = "Limits", value_parser = switch)]
    per_ip_loopback: bool,

    /// IPv6 clients are counted for --max-connections-per-ip by this
    /// prefix of their address (one host usually holds a whole /64).
    #[arg(long, env = "STATICD_IPV6_PREFIX", help_heading = "Limits", value_name = "BITS", default_value_t = config::IPV6_PREFIX, value_parser = clap::value_parser!(u32).range(1..=128))]
    ipv6_prefix: u32,

    /// Bytes per second a request body must arrive at, and a response be
    /// taken at, on average (after the first --read-timeout / --send-timeout);
    /// slower clients are closed. 0: only the timeouts.
    #[arg(long, env = "STATICD_MIN_RATE", help_heading = "Limits", value_name = "BYTES_PER_SEC", default_value_t = config::MIN_RATE)]
    min_rate: u64,

    /// Kernel memory that all connections may hold in raised unsent queues (4 MiB instead of
    /// 128 KiB for a client that takes responses fast). Default: 1/64 of RAM. 0: none
    #[arg(
        long,
        env = "STATICD_UNSENT_BUDGET",
        help_heading = "Limits",
        value_name = "BYTES"
    )]
    unsent_budget: Option<u64>,

    /// Serve one connection on stdin/stdout, then exit (for tcpserver, tcpsvd, inetd, systemd).
    #[arg(long, env = "STATICD_INETD", help_heading = "Serving", value_parser = switch)]
    inetd: bool,

    /// Serve Prometheus metrics at http://ADDR:PORT/metrics, on a listener
    /// of their own (standalone; an IP address and port, e.g. 127.0.0.1:9180).
    #[arg(
        long,
        env = "STATICD_METRICS",
        help_heading = "Production",
        value_name = "ADDR:PORT",
        conflicts_with = "inetd"
    )]
    metrics: Option<std::net::SocketAddr>,

    /// Standalone mode on io_uring instead of epoll (builds with --features uring).
    #[arg(long, env = "STATICD_IO_URING", help_heading = "Production", value_parser = switch, conflicts_with = "inetd")]
    io_uring: bool,

    /// Files served for a directory request ending in `/`: the first of
    /// these comma-separated names that exists.
    #[arg(long, env = "STATICD_INDEX", help_heading = "Serving", value_name = "NAMES", default_value = config::INDEX, value_delimiter = ',',
          value_parser = parse_index_name)]
    index: Vec<String>,

    /// Virtual hosts: serve ROOT/<host>[:<port>] by the Host header, else ROOT/default.
    // This text is --help's, which shows it as written: `[:<port>]` is no link.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(long, env = "STATICD_VHOSTS", help_heading = "Serving", value_parser = switch)]
    vhosts: bool,

    /// Generate an HTML (or JSON) index for directories without an index file.
    #[arg(long, env = "STATICD_LISTING", help_heading = "Serving", value_parser = switch)]
    listing: bool,

    /// Pretty URLs, as Netlify and Cloudflare Pages have them.
    #[arg(long, env = "STATICD_PRETTY_URLS", help_heading = "Serving", value_name = "MODE", value_enum, default_value_t = config::PRETTY_URLS)]
    pretty_urls: PrettyUrls,

    /// A 404 gets only the root's 404.html, not the nearest one in the
    /// path's directory or a parent (Cloudflare Pages').
    #[arg(long, env = "STATICD_NO_NEAREST_404", help_heading = "Serving", value_parser = switch)]
    no_nearest_404: bool,

    /// Single-page app: a path that names nothing (no file, pretty URL or
    /// _redirects rule) gets the root's index page with 200.
    #[arg(long, env = "STATICD_SPA", help_heading = "Serving", value_parser = switch)]
    spa: bool,

    /// Switch to this user (name or uid) after binding the port.
    #[arg(long, env = "STATICD_USER", help_heading = "Production", value_name = "NAME", value_parser = NonEmptyStringValueParser::new())]
    user: Option<String>,

    /// Switch to this group (name or gid); default: the user's primary group.
    #[arg(long, env = "STATICD_GROUP", help_heading = "Production", value_name = "NAME", requires = "user",
          value_parser = NonEmptyStringValueParser::new())]
    group: Option<String>,

    /// chroot(2) here after binding; --root is then inside it.
    #[arg(
        long,
        env = "STATICD_CHROOT",
        help_heading = "Production",
        value_name = "DIR"
    )]
    chroot: Option<PathBuf>,

    /// Run executable *.cgi files as CGI/1.1 scripts (GET, HEAD, POST).
    #[arg(long, env = "STATICD_CGI", help_heading = "Serving", value_parser = switch)]
    cgi: bool,

    /// Seconds a CGI script may run before it is killed with its process group.
    #[arg(long, env = "STATICD_CGI_TIMEOUT", help_heading = "Serving", value_name = "SECS", default_value_t = config::CGI_TIMEOUT, value_parser = clap::value_parser!(u64).range(1..=86400))]
    cgi_timeout: u64,

    /// Most CGI scripts running at once; more get 503.
    #[arg(long, env = "STATICD_CGI_MAX", help_heading = "Serving", value_name = "N", default_value_t = config::CGI_MAX, value_parser = clap::value_parser!(u32).range(1..=4096))]
    cgi_max: u32,

    /// Append the access log to this file instead of stderr; SIGHUP reopens it.
    #[arg(
        long,
        env = "STATICD_LOG_FILE",
        help_heading = "Logging",
        value_name = "PATH"
    )]
    log_file: Option<PathBuf>,

    /// Access-log format, written to stderr (or --log-file).
    #[arg(long, env = "STATICD_LOG_FORMAT", help_heading = "Logging", value_name = "FORMAT", value_enum, default_value_t = config::LOG_FORMAT)]
    log_format: LogFormat,

    /// Seconds a client may take to send a whole request head, or pause in a body.
    #[arg(long, env = "STATICD_READ_TIMEOUT", help_heading = "Limits", value_name = "SECS", default_value_t = config::READ_TIMEOUT, value_parser = clap::value_parser!(u64).range(1..=86400))]
    read_timeout: u64,

    /// Seconds an idle keep-alive connection is kept open.
    #[arg(long, env = "STATICD_KEEPALIVE_TIMEOUT", help_heading = "Limits", value_name = "SECS", default_value_t = config::KEEPALIVE_TIMEOUT, value_parser = clap::value_parser!(u64).range(1..=86400))]
    keepalive_timeout: u64,

    /// Seconds a client may go without accepting any response bytes (see also --min-rate).
    #[arg(long, env = "STATICD_SEND_TIMEOUT", help_heading = "Limits", value_name = "SECS", default_value_t = config::SEND_TIMEOUT, value_parser = clap::value_parser!(u64).range(1..=86400))]
    send_timeout: u64,

    /// Seconds a graceful stop (SIGTERM, SIGINT) gives responses in flight,
    /// and log lines waiting for a blocked log output (standalone).
    #[arg(long, env = "STATICD_SHUTDOWN_GRACE", help_heading = "Production", value_name = "SECS", default_value_t = config::SHUTDOWN_GRACE, value_parser = clap::value_parser!(u64).range(0..=3600))]
    shutdown_grace: u64,

    /// Copy file bytes through a buffer instead of sendfile(2): slower for
    /// large files, but a file truncated while it is sent can only end the
    /// response early, never put other bytes on the wire (see SECURITY.md).
    #[arg(long, env = "STATICD_NO_SENDFILE", help_heading = "Serving", value_parser = switch)]
    no_sendfile: bool,

    /// Paths under PREFIX need a user and password from the htpasswd file HTPASSWD; repeatable.
    ///
    /// PREFIX is a decoded URL path: /private covers /private and
    /// /private/..., and the longest matching prefix decides. HTPASSWD is an
    /// Apache htpasswd file of bcrypt (htpasswd -B), SHA-crypt or apr1
    /// hashes, read again when it changes.
    #[cfg(feature = "auth")]
    #[arg(
        long,
        env = "STATICD_AUTH",
        help_heading = "Serving",
        value_name = "PREFIX=HTPASSWD"
    )]
    auth: Vec<config::AuthArea>,

    /// Every connection (each listener's, or stdin's in --inetd mode) opens
    /// with a PROXY protocol header, v1 or v2, naming its client; one
    /// without a valid header within --read-timeout is closed.
    #[arg(long, env = "STATICD_PROXY_PROTOCOL", help_heading = "Production", value_parser = switch)]
    proxy_protocol: bool,

    /// Believe the Forwarded (for=) or else X-Forwarded-For header of
    /// clients in this range (CIDR, an address, or unix: for Unix-socket
    /// clients): the log and CGI name the rightmost address that is not
    /// itself trusted. Repeatable.
    #[arg(
        long,
        env = "STATICD_TRUSTED_PROXY",
        help_heading = "Production",
        value_name = "CIDR"
    )]
    trusted_proxy: Vec<config::TrustedProxy>,

    #[cfg(feature = "tls")]
    #[command(flatten)]
    https: HttpsArgs,

    #[cfg(feature = "acme")]
    #[command(flatten)]
    acme: AcmeArgs,

    #[cfg(feature = "http2")]
    #[command(flatten)]
    http2: Http2Args,

    #[cfg(feature = "http3")]
    #[command(flatten)]
    http3: Http3Args,

    #[cfg(feature = "compress")]
    #[command(flatten)]
    compress: CompressArgs,

    /// Answer GET and HEAD of this path with 200 while serving and 503
    /// once a graceful stop begins, for load balancers and probes (e.g.
    /// /healthz); never logged, never behind --auth or _redirects.
    #[arg(long, env = "STATICD_HEALTH_PATH", help_heading = "Serving", value_name = "PATH",
          value_parser = parse_health_path)]
    health_path: Option<String>,

    /// Whether --bind or --port was given (or STATICD_BIND, STATICD_PORT).
    #[arg(skip)]
    bind_given: bool,
}

/// Compression on the fly: text, JavaScript, JSON, SVG, XML, WebAssembly
/// and fonts without a precompressed sibling go out in zstd, br or gzip,
/// compressed once and kept in memory.
#[cfg(feature = "compress")]
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Compression")]
#[group(skip)]
struct CompressArgs {
    /// Send files as they are (precompressed siblings are still sent).
    #[arg(long, env = "STATICD_NO_COMPRESS", value_parser = switch)]
    no_compress: bool,

    /// Megabytes of compressed files kept in memory, shared by all threads;
    /// the least recently used go first.
    #[arg(long, env = "STATICD_COMPRESS_CACHE", value_name = "MB", default_value_t = config::COMPRESS_CACHE, conflicts_with = "no_compress",
          value_parser = clap::value_parser!(u32).range(1..=1 << 20))]
    compress_cache: u32,

    /// Larger files are sent as they are: bytes, or with K or M (4M).
    /// Files under 256 bytes are too.
    #[arg(long, env = "STATICD_COMPRESS_MAX", value_name = "BYTES", default_value = config::COMPRESS_MAX, conflicts_with = "no_compress",
          value_parser = config::parse_size)]
    compress_max: u64,
}

#[cfg(feature = "compress")]
impl Cli {
    fn compress_settings(&self) -> Option<config::CompressSettings> {
        let args = &self.compress;
        (!args.no_compress).then_some(config::CompressSettings {
            cache_bytes: config::megabytes(args.compress_cache),
            max_size: args.compress_max,
            background: !self.inetd,
        })
    }
}

#[cfg(not(feature = "compress"))]
impl Cli {
    fn compress_settings(&self) -> Option<config::CompressSettings> {
        None
    }
}

/// HTTP/2: on by default, over TLS (ALPN h2) and in cleartext for clients
/// that open with the HTTP/2 preface (h2c with prior knowledge).
#[cfg(feature = "http2")]
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "HTTP/2 and HTTP/3")]
#[group(skip)]
struct Http2Args {
    /// Speak HTTP/1.x only: no ALPN h2, and no h2c.
    #[arg(long, env = "STATICD_NO_HTTP2", value_parser = switch)]
    no_http2: bool,

    /// Streams a client may have open at once on one HTTP/2 connection.
    #[arg(long, env = "STATICD_H2_MAX_STREAMS", value_name = "N", default_value_t = config::H2_MAX_STREAMS, conflicts_with = "no_http2",
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    h2_max_streams: u32,
}

#[cfg(feature = "http2")]
impl Http2Args {
    fn settings(&self) -> Option<config::Http2> {
        (!self.no_http2).then_some(config::Http2 {
            max_streams: self.h2_max_streams,
        })
    }
}

/// HTTP/3: on by default with HTTPS, over UDP on the HTTPS port numbers.
#[cfg(feature = "http3")]
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "HTTP/2 and HTTP/3")]
#[group(skip)]
struct Http3Args {
    /// No HTTP/3: with HTTPS, staticd otherwise also answers HTTP/3 (QUIC)
    /// on the same port numbers over UDP and advertises it with Alt-Svc.
    /// Standalone only: --inetd mode has no UDP socket to carry QUIC.
    #[arg(long, env = "STATICD_NO_HTTP3", value_parser = switch)]
    no_http3: bool,

    /// Request streams a client may have open at once on one HTTP/3
    /// connection.
    #[arg(long, env = "STATICD_H3_MAX_STREAMS", value_name = "N", default_value_t = config::H3_MAX_STREAMS, conflicts_with = "no_http3",
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    h3_max_streams: u32,
}

/// HTTPS: with a certificate, the listeners (or stdin/stdout in --inetd
/// mode) speak TLS 1.3 and 1.2.
#[cfg(feature = "tls")]
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "HTTPS")]
#[group(skip)]
struct HttpsArgs {
    /// PEM certificate chain (the server's certificate first).
    #[arg(
        long,
        env = "STATICD_TLS_CERT",
        value_name = "FILE",
        requires = "tls_key",
        group = "certificates"
    )]
    tls_cert: Option<PathBuf>,

    /// PEM private key of --tls-cert (PKCS#8, SEC1 or PKCS#1; not encrypted).
    #[arg(
        long,
        env = "STATICD_TLS_KEY",
        value_name = "FILE",
        requires = "tls_cert"
    )]
    tls_key: Option<PathBuf>,

    /// One certificate per host, chosen by SNI: DIR/<name>/fullchain.pem and
    /// privkey.pem (certbot's layout, e.g. /etc/letsencrypt/live). Names no
    /// certificate there holds get --tls-cert's.
    #[arg(
        long,
        env = "STATICD_TLS_DIR",
        value_name = "DIR",
        group = "certificates"
    )]
    tls_dir: Option<PathBuf>,

    /// Session-ticket key: a file of 48 or 80 random bytes (openssl rand 80),
    /// so that sessions resume across processes and machines. Repeat to
    /// rotate: the first issues tickets, all are accepted.
    #[arg(
        long,
        env = "STATICD_TLS_TICKET_KEY",
        value_name = "FILE",
        requires = "certificates"
    )]
    tls_ticket_key: Vec<PathBuf>,

    /// Also listen in cleartext on PORT and answer every request with a 308
    /// redirect to the same URL on https.
    #[arg(
        long,
        env = "STATICD_REDIRECT_HTTP",
        value_name = "PORT",
        requires = "certificates",
        conflicts_with = "inetd"
    )]
    redirect_http: Option<u16>,

    /// Send Strict-Transport-Security: max-age=SECS on HTTPS responses.
    #[arg(
        long,
        env = "STATICD_HSTS",
        value_name = "SECS",
        requires = "certificates"
    )]
    hsts: Option<u64>,
}

#[cfg(feature = "tls")]
impl HttpsArgs {
    /// HTTPS when there are certificates: files, or `acme` to obtain.
    fn settings(&self, acme: Option<config::Acme>) -> Option<config::Https> {
        let pair = self.tls_cert.clone().zip(self.tls_key.clone());
        if pair.is_none() && self.tls_dir.is_none() && acme.is_none() {
            return None;
        }
        Some(config::Https {
            pair,
            dir: self.tls_dir.clone(),
            ticket_keys: self.tls_ticket_key.clone(),
            hsts: self.hsts,
            redirect_port: self.redirect_http,
            acme,
        })
    }
}

/// Automatic HTTPS: certificates from an ACME CA (Let's Encrypt unless
/// told otherwise), obtained and renewed by staticd itself. Using it
/// agrees to the CA's terms of service.
#[cfg(feature = "acme")]
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Automatic HTTPS (ACME)")]
#[group(skip)]
struct AcmeArgs {
    /// Obtain and renew a certificate for NAME; repeatable. The port then
    /// speaks HTTPS; names without a certificate yet get --tls-cert's, or
    /// fail their handshake, until it is issued.
    #[arg(long, env = "STATICD_ACME", value_name = "NAME", groups = ["certificates", "acme_names"],
          conflicts_with = "inetd", value_parser = crate::acme::names::parse)]
    acme: Vec<String>,

    /// With --vhosts: also the name of every virtual-host directory (not
    /// default, names with a port or IP addresses), new ones included.
    #[arg(long, env = "STATICD_ACME_VHOSTS", value_parser = switch, groups = ["certificates", "acme_names"], requires = "vhosts",
          conflicts_with = "inetd")]
    acme_vhosts: bool,

    /// Contact address for the CA's account (expiry and policy mail).
    #[arg(
        long,
        env = "STATICD_ACME_EMAIL",
        value_name = "ADDR",
        requires = "acme_names"
    )]
    acme_email: Option<String>,

    /// State: account, certificates and keys (DIR/<name>/fullchain.pem and
    /// privkey.pem, which --tls-dir reads). Created 0700; processes sharing
    /// it order each certificate once.
    #[arg(
        long,
        env = "STATICD_ACME_DIR",
        value_name = "DIR",
        default_value = config::ACME_DIR,
        requires = "acme_names"
    )]
    acme_dir: PathBuf,

    /// The CA's ACME directory URL.
    #[arg(long, env = "STATICD_ACME_DIRECTORY", value_name = "URL", default_value = config::LETS_ENCRYPT,
          conflicts_with = "acme_staging", requires = "acme_names")]
    acme_directory: String,

    /// Use Let's Encrypt's staging CA (untrusted certificates, generous
    /// rate limits): for trying things out.
    #[arg(long, env = "STATICD_ACME_STAGING", value_parser = switch, requires = "acme_names")]
    acme_staging: bool,

    /// A PEM root to trust, besides the system's, for the CA's own HTTPS
    /// (a private CA such as step-ca, or Pebble).
    #[arg(
        long,
        env = "STATICD_ACME_CA",
        value_name = "FILE",
        requires = "acme_names"
    )]
    acme_ca: Option<PathBuf>,

    /// Answer only this challenge. Default: tls-alpn-01 on the HTTPS port,
    /// and http-01 on the --redirect-http port when it is open.
    #[arg(
        long,
        env = "STATICD_ACME_CHALLENGE",
        value_name = "KIND",
        value_enum,
        requires = "acme_names"
    )]
    acme_challenge: Option<config::Challenge>,

    /// Seconds before the first retry after a failed order; doubles after
    /// each further failure, up to a day (a CA's Retry-After wins if later).
    #[arg(long, env = "STATICD_ACME_BACKOFF", value_name = "SECS", default_value_t = config::ACME_BACKOFF, requires = "acme_names",
          value_parser = clap::value_parser!(u64).range(1..=86400))]
    acme_backoff: u64,
}

#[cfg(feature = "acme")]
impl AcmeArgs {
    fn settings(&self) -> Option<config::Acme> {
        use config::Challenge;
        if self.acme.is_empty() && !self.acme_vhosts {
            return None;
        }
        let directory = match self.acme_staging {
            true => config::LETS_ENCRYPT_STAGING.to_string(),
            false => self.acme_directory.clone(),
        };
        let challenges = match self.acme_challenge {
            None => vec![Challenge::TlsAlpn01, Challenge::Http01],
            Some(only) => vec![only],
        };
        Some(config::Acme {
            names: self.acme.clone(),
            vhosts: self.acme_vhosts,
            email: self.acme_email.clone(),
            dir: self.acme_dir.clone(),
            directory,
            ca: self.acme_ca.clone(),
            challenges,
            backoff: Duration::from_secs(self.acme_backoff),
        })
    }
}

#[cfg(all(feature = "tls", not(feature = "acme")))]
impl Cli {
    fn acme_settings(&self) -> Option<config::Acme> {
        None
    }
}

#[cfg(feature = "acme")]
impl Cli {
    fn acme_settings(&self) -> Option<config::Acme> {
        self.acme.settings()
    }
}

impl Cli {
    /// The command line, or the exit code after clap's message: help and
    /// version go to stdout in full; a usage error is clap's whole message
    /// (valid values, "a similar argument exists" and other tips) on
    /// stderr, as `staticd: ...`, with exit code 2.
    pub fn from_command_line() -> Result<Cli, ExitCode> {
        let mut matches = Cli::command().try_get_matches().map_err(usage_error)?;
        // Asked before the values are taken out of the matches below.
        let bind_given = bind_given(&matches);
        // `from_arg_matches` would clone the matches first: 230 allocations
        // of a one-request process's 1,000 (inetd mode), for nothing.
        let mut cli = Cli::from_arg_matches_mut(&mut matches).map_err(usage_error)?;
        cli.bind_given = bind_given;
        Ok(cli)
    }

    /// Whether the command line says where to listen (--bind or --port) in
    /// standalone mode: sockets systemd passes are served instead.
    pub fn names_listeners(&self) -> bool {
        self.bind_given && !self.inetd
    }

    /// Every setting, the sizes that depend on the machine included:
    /// threads by its cores, connections by the descriptor limit as it is
    /// now (raise it first).
    pub fn into_config(self) -> Config {
        let compress = self.compress_settings();
        #[cfg(feature = "tls")]
        let acme = self.acme_settings();
        // Counting cores reads a dozen cgroup files: inetd mode, started
        // once per connection, has no threads to size and skips it.
        let threads = match (self.inetd, self.threads) {
            (true, _) => 1,
            (false, Some(n)) => usize::from(n),
            (false, None) => cores(),
        };
        let max_connections = match (self.inetd, self.max_connections) {
            (true, _) => 1,
            (false, Some(n)) => n as usize,
            (false, None) => default_max_connections(threads),
        };
        let secs = Duration::from_secs;
        Config {
            root: self.root,
            port: self.port,
            bind: self.bind,
            unix_mode: self.unix_mode,
            reuse_port: self.reuse_port,
            threads,
            inetd: self.inetd,
            io_uring: self.io_uring,
            index: self.index,
            features: config::Features {
                vhosts: self.vhosts,
                listing: self.listing,
                cgi: self.cgi,
                health_path: self.health_path,
                compress,
                routes: config::Routes {
                    pretty_urls: self.pretty_urls,
                    nearest_404: !self.no_nearest_404,
                    spa: self.spa,
                },
            },
            cgi_timeout: secs(self.cgi_timeout),
            cgi_max: self.cgi_max as usize,
            max_connections,
            max_connections_per_ip: self.max_connections_per_ip as usize,
            per_ip_loopback: self.per_ip_loopback,
            // Within 1..=128, as parsed.
            ipv6_prefix: self.ipv6_prefix as u8,
            min_rate: self.min_rate,
            unsent_budget: self.unsent_budget,
            log_format: self.log_format,
            log_file: self.log_file,
            read_timeout: secs(self.read_timeout),
            keepalive_timeout: secs(self.keepalive_timeout),
            send_timeout: secs(self.send_timeout),
            shutdown_grace: secs(self.shutdown_grace),
            no_sendfile: self.no_sendfile,
            privileges: Privileges {
                user: self.user,
                group: self.group,
                chroot: self.chroot,
            },
            #[cfg(feature = "tls")]
            https: self.https.settings(acme),
            #[cfg(not(feature = "tls"))]
            https: None,
            #[cfg(feature = "http2")]
            http2: self.http2.settings(),
            #[cfg(not(feature = "http2"))]
            http2: None,
            #[cfg(feature = "http3")]
            http3: !self.http3.no_http3,
            #[cfg(not(feature = "http3"))]
            http3: false,
            #[cfg(feature = "http3")]
            h3_max_streams: self.http3.h3_max_streams,
            #[cfg(not(feature = "http3"))]
            h3_max_streams: config::H3_MAX_STREAMS,
            alt_svc_port: None,
            #[cfg(feature = "auth")]
            auth: self.auth,
            #[cfg(not(feature = "auth"))]
            auth: Vec::new(),
            metrics: self.metrics,
            proxy_protocol: self.proxy_protocol,
            trusted_proxies: config::TrustedProxies(self.trusted_proxy),
        }
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// What the descriptor limit leaves for connections beside the open-file
/// cache, CGI pipes and the listeners.
fn default_max_connections(threads: usize) -> usize {
    use rustix::process::{getrlimit, Resource};
    let nofile = getrlimit(Resource::Nofile)
        .current
        .unwrap_or(1 << 20)
        .min(1 << 20) as usize;
    let reserved = 64 + threads * site::cache::MAX_ENTRIES;
    nofile.saturating_sub(reserved).max(16)
}

fn usage_error(mut e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    add_root_tip(&mut e);
    let rendered = e.render().to_string();
    let message = rendered.strip_prefix("error: ").unwrap_or(&rendered);
    eprint!("staticd: {message}");
    ExitCode::from(2)
}

/// `staticd www` is the natural mistake for `staticd --root www`: say so.
fn add_root_tip(e: &mut clap::Error) {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::UnknownArgument {
        return;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return;
    };
    if arg.starts_with('-') {
        return;
    }
    let tip = format!("to serve the directory '{arg}', use '--root {arg}'").into();
    let mut tips = match e.get(ContextKind::Suggested) {
        Some(ContextValue::StyledStrs(tips)) => tips.clone(),
        _ => Vec::new(),
    };
    tips.push(tip);
    e.insert(ContextKind::Suggested, ContextValue::StyledStrs(tips));
}

/// An on/off flag's value: `true` from the flag itself, or what its
/// STATICD_* variable says. The usual spellings (1/0, true/false, yes/no,
/// on/off, any case) and, as systemd's `Environment=STATICD_LISTING=`
/// means, empty for off; anything else is refused, never guessed at.
fn switch(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "y" | "on" => Ok(true),
        "" | "0" | "false" | "no" | "n" | "off" => Ok(false),
        _ => Err("1/0, true/false, yes/no or on/off".into()),
    }
}

/// `--health-path`: an absolute path with nothing to decode, compared
/// byte for byte with the request's path (its query ignored).
fn parse_health_path(s: &str) -> Result<String, String> {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"/-._~".contains(&b);
    match s.starts_with('/') && s.bytes().all(plain) {
        true => Ok(s.to_string()),
        false => Err("a path such as /healthz: letters, digits and / - . _ ~ only".into()),
    }
}

fn parse_index_name(s: &str) -> Result<String, String> {
    site::check_index_name(s)?;
    Ok(s.to_string())
}

/// Whether --bind or --port was given, on the command line or by
/// STATICD_BIND or STATICD_PORT.
fn bind_given(matches: &clap::ArgMatches) -> bool {
    use clap::parser::ValueSource;
    ["bind", "port"].iter().any(|id| {
        matches!(
            matches.value_source(id),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flags' defaults are `Config::default()`'s, but for what the
    /// command line sizes by the machine and the features it turns on.
    #[test]
    fn an_empty_command_line_is_the_default_config() {
        let mut parsed = Cli::try_parse_from(["staticd"]).unwrap().into_config();
        let default = Config::default();
        assert!(parsed.threads >= 1 && parsed.max_connections >= 16);
        assert_eq!(
            parsed.features.compress.is_some(),
            cfg!(feature = "compress")
        );
        assert_eq!(parsed.http2.is_some(), cfg!(feature = "http2"));
        if let Some(settings) = parsed.features.compress.take() {
            assert_eq!(settings, config::CompressSettings::default());
        }
        if let Some(h2) = parsed.http2.take() {
            assert_eq!(h2, config::Http2::default());
        }
        // HTTP/3 is on (for when HTTPS is) in a build that has it.
        assert_eq!(parsed.http3, cfg!(feature = "http3"));
        parsed.http3 = default.http3;
        parsed.threads = default.threads;
        parsed.max_connections = default.max_connections;
        assert_eq!(format!("{parsed:?}"), format!("{default:?}"));
    }
}
