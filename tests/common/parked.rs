//! Parked connections (src/serve/park.rs): idle keep-alive connections the
//! standalone event loop moves out of the runtime after a short quiet spell,
//! counted in the server process's epoll sets; what tests wait for instead
//! of a pause "long enough" for a connection to be parked.

use super::*;

/// Longer than the server's quiet spell before parking (100 ms): how long a
/// run that does not park leaves its connections idle.
const PARKED: Duration = Duration::from_millis(400);

/// Whether this run parks: plain HTTP/1.1 on the event loop.
pub fn parks(server: &Server) -> bool {
    !server.is_tls() && !server.is_h2() && !server.is_io_uring()
}

/// How many connections the server process holds in its epoll sets of
/// parked ones (one per worker): what /proc/PID/fdinfo lists for each epoll
/// descriptor, counting the watched descriptors registered level-triggered
/// (tokio's own sets register edge-triggered).
pub fn parked_count(pid: u32) -> usize {
    let dir = format!("/proc/{pid}/fdinfo");
    let mut total = 0;
    for entry in fs::read_dir(&dir).expect("fdinfo") {
        let Ok(info) = fs::read_to_string(entry.unwrap().path()) else {
            continue;
        };
        let parked = info
            .lines()
            .filter(|l| l.starts_with("tfd:"))
            .filter(|l| {
                l.split_whitespace()
                    .skip_while(|w| *w != "events:")
                    .nth(1)
                    .and_then(|m| u32::from_str_radix(m, 16).ok())
                    // EPOLLIN | EPOLLRDHUP (with the always-on EPOLLERR
                    // and EPOLLHUP), without EPOLLET.
                    == Some(0x2019)
            })
            .count();
        total += parked;
    }
    total
}

/// Waits until the server has parked `n` connections, in a run that parks
/// (on a loaded machine that takes longer than the quiet spell); in one that
/// does not, leaves the connections idle for [`PARKED`].
pub fn wait_idle(server: &mut Server, n: usize) {
    match parks(server) {
        true => wait_parked(server, n),
        false => thread::sleep(PARKED),
    }
}

/// Waits (up to [`IO_TIMEOUT`]) until exactly `n` connections are parked.
pub fn wait_parked(server: &mut Server, n: usize) {
    let pid = server.process().id();
    let parked = eventually(IO_TIMEOUT, || (parked_count(pid) == n).then_some(()));
    assert!(
        parked.is_some(),
        "{} connections parked, not {n}, after {IO_TIMEOUT:?}",
        parked_count(pid)
    );
}
