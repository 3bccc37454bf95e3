//! How the transports measure a response against `--min-rate` and `--send-timeout` (see
//! [`pace`](crate::pace)): progress is what the peer acknowledged on a TCP socket (TCP_INFO), read
//! only while a response waits (once, for where its count starts, then four times a timeout:
//! [`Pace::check_at`](crate::pace::Pace::check_at)), never per write. Where no acknowledgements can
//! be read (a pipe, io_uring's and the fuzz target's HTTP/2 streams), bytes written count: the
//! kernel holds at most [`sys::UNSENT_LIMIT`] of them unsent, so they run
//! ahead of what the client took by a bounded amount, and credit is capped at one timeout anyway.
//!
//! A client given up on is reset rather than closed: what is queued for it
//! would otherwise hold kernel memory for as long as it takes to read
//! (nginx's `reset_timedout_connection`); the bytes that reset discards are
//! not counted as sent.

use std::future::Future;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::time::Instant;

use crate::pace::Pace;
use crate::sys;

/// Tells [`pace`](crate::pace) how far a response waiting on `fd` has got, at `now`: on a
/// TCP socket the bytes the peer acknowledged (read the first time, and
/// when `due`: a wait until `pace.check_at` ran out), elsewhere the bytes
/// `written` (`paced`: how many of those it was told of). Returns whether
/// the response may go on waiting, until `pace.check_at(now)`; if not, see
/// `give_up`. For the writers that wait themselves (inetd's poll(2), the
/// event loop).
pub(crate) fn account(
    pace: &mut Pace,
    fd: BorrowedFd<'_>,
    now: Instant,
    (written, paced): (u64, &mut u64),
    due: bool,
) -> bool {
    if pace.counting_acks() && !due {
        return true;
    }
    match sys::bytes_acked(fd) {
        Some(acked) => pace.delivered(now, acked),
        None => {
            pace.progress(now, written - *paced);
            *paced = written;
            pace.deadline() > now
        }
    }
}

/// Gives up on the client of `fd`: the connection will be reset when
/// closed, discarding what the kernel still holds for it. Returns how many
/// written bytes that is (never acknowledged): they did not reach the
/// client, and the access log must not count them.
pub(crate) fn give_up(fd: BorrowedFd<'_>) -> u64 {
    sys::reset_on_close(fd);
    sys::unacked(fd)
}

/// A socket whose acknowledged bytes can be read while a write holds it
/// (io_uring's operation, HTTP/2's plan): its descriptor's number, valid as
/// long as the connection that owns the socket.
#[derive(Clone, Copy)]
pub(crate) struct Acks(RawFd);

impl Acks {
    /// `fd`'s counter, if it is a TCP socket (one reading; None otherwise).
    pub(crate) fn of(fd: BorrowedFd<'_>) -> Option<(Acks, u64)> {
        sys::bytes_acked(fd).map(|n| (Acks(fd.as_raw_fd()), n))
    }

    fn fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the connection that owns the socket outlives every `Acks`
        // made of it (they live only inside one of its writes).
        unsafe { BorrowedFd::borrow_raw(self.0) }
    }
}

/// Starts measuring by acknowledgements (see [`Acks::of`](crate::serve::pacing::Acks::of)) when a
/// write may not be taken at once: `size` above what the kernel queues unsent.
pub(crate) fn start(pace: &mut Pace, fd: BorrowedFd<'_>, size: u64) -> Option<Acks> {
    if size <= u64::from(sys::UNSENT_LIMIT) {
        return None;
    }
    let (acks, acked) = Acks::of(fd)?;
    pace.delivered(Instant::now(), acked);
    Some(acks)
}

/// Waits for `write`, a response's write, without giving it up while the
/// client keeps pace: at each of [`pace`](crate::pace)'s checks the acknowledged bytes are
/// read (with `acks`), and only a client that took too little is given up
/// on (`give_up`; Err: the bytes discarded). Without `acks`, the deadline
/// alone ends it (Err(0)). The write itself is never cancelled while the
/// client keeps pace, so what it took is always known.
pub(crate) async fn paced<F: Future>(
    write: F,
    acks: Option<Acks>,
    pace: &mut Pace,
) -> Result<F::Output, u64> {
    let mut write = std::pin::pin!(write);
    let mut now = Instant::now();
    loop {
        let check = pace.check_at(now).into();
        if let Ok(done) = tokio::time::timeout_at(check, write.as_mut()).await {
            return Ok(done);
        }
        now = Instant::now();
        let going = match acks {
            Some(acks) => sys::bytes_acked(acks.fd()).is_some_and(|n| pace.delivered(now, n)),
            None => pace.deadline() > now,
        };
        if !going {
            return Err(acks.map_or(0, |acks| give_up(acks.fd())));
        }
    }
}

/// `n` bytes written, as progress while acknowledgements are not counted.
pub(crate) fn written(pace: &mut Pace, n: u64) {
    if !pace.counting_acks() {
        pace.progress(Instant::now(), n);
    }
}

/// After a response could not be sent: a client that took it slower than
/// `--min-rate` allows is named in the log (see [`complaint`](crate::complaint)).
pub(crate) fn response_failed(
    e: &std::io::Error,
    pace: &crate::pace::Pace,
    client: &str,
    cfg: &crate::config::Config,
) {
    if e.kind() == std::io::ErrorKind::TimedOut && pace.too_slow() {
        let rate = cfg.min_rate;
        crate::complaint::complain(client, crate::complaint::Complaint::SlowResponse { rate });
    }
}
