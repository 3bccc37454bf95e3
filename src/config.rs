//! Every knob staticd has, with its default, in one struct.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use crate::site::Features;

/// How access-log lines are written (to stderr).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// NCSA common log format.
    Common,
    /// Apache's combined format: common plus referer and user agent.
    Combined,
    /// fnord's line: `IP STATUS SIZE HOST USER_AGENT REFERER PATH`.
    Fnord,
    Off,
}

/// Settings shared by every transport. Built once by `main` and never changed.
#[derive(Clone, Debug)]
pub struct Config {
    pub root: PathBuf,
    pub port: u16,
    /// Addresses to listen on; empty means every IPv4 and IPv6 address.
    pub bind: Vec<IpAddr>,
    pub threads: usize,
    pub inetd: bool,
    /// Standalone mode on io_uring (`serve::uring`) instead of epoll.
    pub io_uring: bool,
    pub index: String,
    pub features: Features,
    pub log_format: LogFormat,
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
    /// How long in-flight responses may run after SIGINT/SIGTERM.
    pub shutdown_grace: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            root: PathBuf::from("."),
            port: 8080,
            bind: Vec::new(),
            // main counts the cores; a library user says how many.
            threads: 1,
            inetd: false,
            io_uring: false,
            index: "index.html".to_string(),
            features: Features::default(),
            log_format: LogFormat::Common,
            read_timeout: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(15),
            send_timeout: Duration::from_secs(30),
            no_sendfile: false,
            cgi_timeout: Duration::from_secs(30),
            cgi_max: 16,
            max_connections: 1024,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}
