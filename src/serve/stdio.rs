//! inetd mode: one connection on fd 0 (requests) and fd 1 (responses), in
//! plain blocking code. Under tcpserver both are the same socket; with
//! pipes they are not, and sockets-only calls are skipped.

use std::cell::RefCell;
use std::io;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::cgi::http1::{self as cgi_http1, ClientIo};
use super::http1::{Action, Http1};
use super::pacing::response_failed;
use super::proxy_header;
use super::wire::{Got, Wire};
use super::writer::{send_blocking, ResponseWriter};
use super::{linger_deadline, Extras};
use crate::cgi;
use crate::client_name::ClientName;
use crate::config::Config;
use crate::pace::Pace;
use crate::site::Site;
use crate::sys;

/// How long an exiting inetd process waits for CGI stderr to drain.
const STDERR_GRACE: Duration = Duration::from_secs(2);

pub fn run(cfg: Arc<Config>, site: Arc<Site>, extras: Extras) -> io::Result<()> {
    // SIGTERM (a super-server stopping) then ends the response in flight,
    // which is logged with the bytes it sent, instead of killing the
    // process before its log line. Should this fail, SIGTERM kills as it
    // always did: serving goes on.
    let _ = sys::stop_on_signals();
    let served = serve(&cfg, &site, extras);
    // The process exits next: let CGI scripts' last stderr lines through.
    cgi::finish_stderr(STDERR_GRACE);
    served
}

fn serve(cfg: &Arc<Config>, site: &Arc<Site>, extras: Extras) -> io::Result<()> {
    // SAFETY: fd 0 and fd 1 are open for the life of the process; inetd,
    // tcpserver or the shell gave them to us.
    let (input, output) = unsafe { (BorrowedFd::borrow_raw(0), BorrowedFd::borrow_raw(1)) };
    let out_socket = sys::is_socket(output);
    if out_socket {
        sys::tune_connection(output);
        // The super-server's socket has no bound on what waits unsent in
        // the kernel (see sys::UNSENT_LIMIT).
        sys::bound_unsent(output);
        // A blocking sendfile(2) returns only when the socket buffer stays
        // full for the whole SO_SNDTIMEO, and then with a partial count, so
        // a stalled client could hold on for several timeouts. Non-blocking
        // writes with poll(2) give it exactly one.
        sys::set_nonblocking(output);
    }
    let (wire, kind) = extras.wire()?;
    let wire = RefCell::new(wire);
    let mut conn = Http1::new(cfg, kind, client_address(input));
    let linger_after = loop {
        let action = conn.next(cfg, site, sys::stop_requested(), &wire.borrow());
        match action {
            Action::ProxyHeader => {
                conn.proxied();
                match proxy_header::read_blocking(input, cfg.read_timeout) {
                    Ok(source) => proxy_header::name_client(conn.session(), input, source),
                    Err(_) => return Ok(()),
                }
            }
            #[cfg(feature = "http2")]
            Action::Http2 => {
                let tls = wire.borrow().tls_summary();
                let session = conn.session();
                let served = super::h2::Served {
                    cfg: Arc::clone(cfg),
                    site: Arc::clone(site),
                    origin: super::h2::origin(session, tls, input),
                };
                let read = std::mem::take(session.input());
                let io = (input, output);
                return super::h2::serve_stdio(served, wire.into_inner(), read, io);
            }
            #[cfg(not(feature = "http2"))]
            Action::Http2 => unreachable!("the prelude sniffs for HTTP/2 only when it is built in"),
            Action::Sniff => {
                let mut wire = wire.borrow_mut();
                let timeout = cfg.read_timeout;
                let got = read_some(&mut wire, input, output, conn.session().input(), timeout);
                if !conn.brought(got) {
                    return Ok(());
                }
            }
            Action::Read { deadline, .. } => {
                let timeout = deadline.saturating_duration_since(Instant::now());
                let mut wire = wire.borrow_mut();
                let got = read_some(&mut wire, input, output, conn.session().input(), timeout);
                // `Closed` also stands for the deadline.
                if !conn.brought(got) {
                    if Instant::now() >= deadline {
                        conn.timed_out(cfg);
                    }
                    return Ok(());
                }
            }
            Action::Send(mut sent) => {
                let mut wire = wire.borrow_mut();
                let mut out = wire.out(output, out_socket);
                let mut writer =
                    ResponseWriter::new(&sent.wire, &sent.response.body).copying(cfg.no_sendfile);
                let mut pace = Pace::new(Instant::now(), cfg.send_timeout, cfg.min_rate);
                let result = send_blocking(&mut out, &mut writer, &mut pace);
                sent.written = writer.written();
                // Dropping `sent` writes its log line.
                if let Err(e) = result {
                    response_failed(&e, &pace, conn.session().client(), cfg);
                    return Ok(());
                }
            }
            Action::Cgi(job) => {
                let mut wire = wire.borrow_mut();
                let io = ClientIo {
                    input,
                    output,
                    wire: &mut wire,
                };
                let session = conn.session();
                let origin = *session.origin();
                let keep_alive = cgi_http1::run(job, io, session.input(), cfg, site, &origin);
                conn.cgi_finished(keep_alive);
            }
            Action::Close { linger } => break linger,
        }
    };
    wire.borrow_mut().close(output);
    if out_socket {
        sys::shutdown_write(output);
        if linger_after {
            linger(input);
        }
    }

    Ok(())
}

/// Reads what is there into `buf`, waiting up to `timeout` for it; over
/// TLS, handshake replies go out on `output` first. `Closed` also stands
/// for a client that is silent too long or sends what TLS refuses (after
/// the alert went out).
fn read_some(
    wire: &mut Wire,
    input: BorrowedFd<'_>,
    output: BorrowedFd<'_>,
    buf: &mut Vec<u8>,
    timeout: Duration,
) -> Got {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut out = wire.out(output, false);
        if out.pending() && send_pending(&mut out, left).is_err() {
            return Got::Closed;
        }
        match sys::wait(input, false, left) {
            Ok(true) => {}
            _ => return Got::Closed,
        }
        let before = buf.len();
        match wire.read(input, buf) {
            Ok(Got::Bytes) if buf.len() == before => {}
            Ok(got) => return got,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => {
                // A TLS alert may wait: let it out, without waiting.
                let _ = wire.out(output, false).flush();
                return Got::Closed;
            }
        }
    }
}

/// Writes what TLS has waiting (handshake messages), within `timeout`.
fn send_pending(out: &mut super::writer::Out<'_>, timeout: Duration) -> io::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        match out.flush() {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                if !sys::wait(out.raw(), true, left)? {
                    return Err(io::ErrorKind::TimedOut.into());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Reads and drops what the client still sends until it closes or the
/// linger time is over.
fn linger(fd: BorrowedFd<'_>) {
    let deadline = linger_deadline();
    let mut scratch = [0u8; 4096];
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match sys::wait(fd, false, left) {
            Ok(true) => match sys::read(fd, &mut scratch) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            _ => return,
        }
    }
}

/// The client's IP address for the log, as the super-server reports it.
fn client_address(input: BorrowedFd<'_>) -> ClientName {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    if let Some(ip) = env("TCPREMOTEIP") {
        return ip.into();
    }
    if let Some(addr) = env("TCPREMOTEADDR") {
        return strip_port(&addr).into();
    }
    if let Some(host) = env("REMOTE_HOST") {
        return host.into();
    }
    sys::peer_addr(input).map_or_else(|| ClientName::new("-"), |a| ClientName::ip(a.ip()))
}

/// `1.2.3.4:5678` -> `1.2.3.4`; `[::1]:5678` -> `::1`; a bare IP stays.
fn strip_port(addr: &str) -> &str {
    if let Some(rest) = addr.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match addr.rsplit_once(':') {
        Some((ip, port)) if !ip.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => ip,
        _ => addr,
    }
}

#[cfg(test)]
mod tests {
    use super::strip_port;

    #[test]
    fn addresses() {
        assert_eq!(strip_port("10.1.2.3:4567"), "10.1.2.3");
        assert_eq!(strip_port("[::1]:80"), "::1");
        assert_eq!(strip_port("::1"), "::1");
        assert_eq!(strip_port("10.1.2.3"), "10.1.2.3");
    }
}
