//! The accelerators of the fourth table: Varnish (Debian `varnish`) and
//! Squid (Debian `squid`, accelerator mode) in front of a backend, and
//! Hitch (Debian `hitch`) terminating TLS in front of Varnish; each started
//! here with its own scratch directory, and checked to answer from its
//! cache before it is measured.

use std::fmt::Write as _;
use std::fs;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;

use super::process::{self, Proc};

/// How long a cache gets to start and answer.
const START_LIMIT: Duration = Duration::from_secs(30);

/// The program, or why it cannot run here.
pub fn locate(program: &str, package: &str) -> Result<PathBuf, String> {
    crate::programs::which(program)
        .ok_or_else(|| format!("{package} is not installed (apt-get install {package})"))
}

fn scratch(dir: &Path) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // Varnish's and Squid's unprivileged users write here.
    fs::set_permissions(dir, fs::Permissions::from_mode(0o777))
        .map_err(|e| format!("{}: {e}", dir.display()))
}

/// `varnishd -F` with the built-in VCL and `-b` the backend, a 256 MB
/// malloc store, objects kept an hour (`default_ttl`: the backend sends no
/// Cache-Control), listening on `port`; with `proxy`, that listener takes
/// the PROXY protocol (from Hitch) instead of plain HTTP.
pub fn varnish(
    program: &Path,
    dir: &Path,
    port: u16,
    backend: SocketAddr,
    proxy: bool,
) -> Result<Proc, String> {
    scratch(dir)?;
    let listen = format!("127.0.0.1:{port}{}", if proxy { ",PROXY" } else { "" });
    let mut cmd = Command::new(program);
    cmd.arg("-F")
        .args(["-a", &listen])
        .args(["-b", &backend.to_string()])
        .arg("-n")
        .arg(dir.join("work"))
        .args(["-s", "malloc,256m"])
        .args(["-p", "default_ttl=3600"]);
    let proc = Proc::spawn(cmd, dir, Duration::from_secs(5))?;
    Ok(proc)
}

/// Squid 5's accelerator ("reverse proxy") mode: one `http_port` with
/// `accel`, the backend as the origin-server `cache_peer`, a memory cache
/// only (no `cache_dir`), every object fresh for a day whatever its
/// Last-Modified says (the docroot's files are seconds old, which Squid's
/// heuristic would make stale at once), no access log.
pub fn squid_conf(dir: &Path, port: u16, backend: SocketAddr) -> String {
    let d = dir.display();
    let b = backend.port();
    let mut c = String::new();
    let _ = write!(
        c,
        r#"# Written by benches/compare --seed-tables.
http_port 127.0.0.1:{port} accel defaultsite=127.0.0.1:{b} no-vhost
cache_peer 127.0.0.1 parent {b} 0 no-query originserver name=backend
acl loopback src 127.0.0.1/32
http_access allow loopback
http_access deny all
cache_peer_access backend allow all
cache_mem 256 MB
maximum_object_size_in_memory 2 MB
memory_cache_mode always
refresh_pattern . 1440 100% 1440 override-expire override-lastmod ignore-reload
access_log none
cache_store_log none
cache_log {d}/cache.log
pid_filename {d}/squid.pid
coredump_dir {d}
netdb_filename none
visible_hostname localhost
shutdown_lifetime 1 seconds
max_filedescriptors 65536
"#
    );
    c
}

/// `squid -N` (no daemon) with `squid_conf`.
pub fn squid(program: &Path, dir: &Path, port: u16, backend: SocketAddr) -> Result<Proc, String> {
    scratch(dir)?;
    let conf = dir.join("squid.conf");
    fs::write(&conf, squid_conf(dir, port, backend))
        .map_err(|e| format!("{}: {e}", conf.display()))?;
    let mut cmd = Command::new(program);
    cmd.arg("-N").arg("-f").arg(&conf);
    Proc::spawn(cmd, dir, Duration::from_secs(5))
}

/// Hitch on `port`, one worker per core, TLS 1.2 and 1.3 with the run's
/// certificate, writing PROXY v2 to `backend` (Varnish's PROXY listener).
pub fn hitch(
    program: &Path,
    dir: &Path,
    port: u16,
    backend: SocketAddr,
    tls: &crate::tls::TlsFiles,
    cores: usize,
) -> Result<Proc, String> {
    scratch(dir)?;
    // Hitch reads the certificate and its key from one PEM file.
    let pem = dir.join("hitch.pem");
    let both = fs::read_to_string(&tls.cert).map_err(|e| e.to_string())?
        + &fs::read_to_string(&tls.key).map_err(|e| e.to_string())?;
    fs::write(&pem, both).map_err(|e| format!("{}: {e}", pem.display()))?;
    let mut cmd = Command::new(program);
    cmd.arg(format!("--frontend=[127.0.0.1]:{port}"))
        .arg(format!("--backend=[127.0.0.1]:{}", backend.port()))
        .arg("--write-proxy-v2=on")
        .arg(format!("--workers={cores}"))
        .arg("--backlog=4096")
        .arg("--daemon=off")
        .arg("--tls-protos=TLSv1.2 TLSv1.3")
        .arg(format!("--ocsp-dir={}", dir.display()))
        // Hitch refuses to run its workers as root; Debian's package
        // makes this user for it.
        .arg(format!("--user={}", hitch_user()))
        .arg(&pem);
    Proc::spawn(cmd, dir, Duration::from_secs(3))
}

/// Debian's `_hitch` user if it exists, else `nobody`.
fn hitch_user() -> &'static str {
    let passwd = fs::read_to_string("/etc/passwd").unwrap_or_default();
    if passwd.lines().any(|l| l.starts_with("_hitch:")) {
        "_hitch"
    } else {
        "nobody"
    }
}

/// Waits until the cache at `addr` serves `path` (of `size` bytes) from
/// its cache: fetches it until the response says it was a hit, and returns
/// the header that says so.
pub fn wait_for_hit(
    proc: &mut Proc,
    addr: SocketAddr,
    path: &str,
    size: u64,
    tls: Option<&Arc<ClientConfig>>,
) -> Result<String, String> {
    proc.wait_until(START_LIMIT, || {
        let r = process::get_ok(addr, path, size, tls)?;
        hit(&r).ok_or_else(|| format!("no cache hit yet:\n{}", r.head))
    })
}

/// The header that shows a response came from the cache: Varnish's
/// `X-Varnish` with two transaction ids (this request's and the one that
/// fetched the object) and an `Age`; Squid's `X-Cache: HIT ...`.
fn hit(r: &process::Response) -> Option<String> {
    if let Some(v) = r.header("X-Varnish") {
        let age = r.header("Age")?;
        return (v.split_whitespace().count() == 2).then(|| format!("X-Varnish: {v}, Age: {age}"));
    }
    let x = r.header("X-Cache")?;
    x.starts_with("HIT").then(|| format!("X-Cache: {x}"))
}
