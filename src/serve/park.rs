//! Idle keep-alive connections, parked outside the runtime.
//!
//! A connection waiting for its next request is a task (its future and header, about 1 KiB) plus
//! tokio's record of the socket (256 bytes). Most idle connections stay idle for long, so after
//! [`PARK_AFTER`] of quiet a connection is parked, as nginx keeps
//! its idle keep-alive connections: its task ends, the socket leaves tokio for this worker's own
//! epoll set, and what the connection needs to go on waits in a compact record (a couple of hundred
//! bytes). When the client sends again, or closes, the record becomes a task again and carries on
//! where it stopped. The keep-alive timeout still holds: a sweep each second closes the parked
//! connections whose timeout has passed.
//!
//! At `--max-connections`, parked connections are the ones closed to make room for new clients,
//! oldest first (`shed_oldest`); then idle ones that wait as tasks (TLS, Unix sockets, the first
//! [`PARK_AFTER`] of quiet), also oldest first
//! ([`idle::shed_waiting`](crate::serve::idle::shed_waiting)).
//!
//! Each worker thread has its own lot, watched by one task on its runtime;
//! records never move between threads.

use std::cell::RefCell;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::{Duration, Instant};

use rustix::buffer::spare_capacity;
use rustix::event::epoll;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use super::idle::shed_waiting;
use super::limits::Slot;
use crate::complaint::{complain, Complaint};
use crate::origin::Kind;
use crate::session::Session;

/// How long a keep-alive connection is quiet before it is parked: long
/// enough that a busy connection (its next request a few milliseconds
/// away) never pays for parking, short enough that connections held open
/// by idle clients cost little.
pub(crate) const PARK_AFTER: Duration = Duration::from_millis(100);
/// How often parked connections are checked against their keep-alive
/// timeout.
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// Events taken from the lot's epoll set per call.
const EVENTS: usize = 256;
/// Records are kept in pages of this many, which never move: one growing
/// array would leave a freed copy of itself behind at every doubling, as
/// much memory again as the records.
const PAGE: usize = 64;

type Page = Box<[Option<Parked>; PAGE]>;

/// What a parked connection needs to carry on.
pub(crate) struct Parked {
    pub(crate) stream: std::net::TcpStream,
    pub(crate) session: Session,
    pub(crate) kind: Kind,
    /// Held while parked: a parked connection still counts against
    /// `--max-connections`.
    pub(crate) slot: Slot,
    /// When its keep-alive timeout ends.
    pub(crate) deadline: Instant,
    /// Whether the next bytes may still open HTTP/2.
    pub(crate) sniffing: bool,
    /// Whether TCP_NODELAY is already set.
    pub(crate) tuned: bool,
}

/// This worker's parked connections.
struct Lot {
    /// The epoll set, owned by `watch` (which clears the lot before it
    /// lets go of it).
    epoll: RawFd,
    /// Indexed by the epoll event's data (page, then place in the page);
    /// None where free.
    pages: Vec<Page>,
    free: Vec<usize>,
    /// Whether a connection was parked since the last sweep.
    parked: bool,
}

/// The events of one epoll_wait(2), kept between calls.
struct Events(Vec<epoll::Event>);

// SAFETY: an event's data is only ever a record's index (a u64); the
// pointer variant of its union, which makes it !Send, is never used.
unsafe impl Send for Events {}

thread_local! {
    static LOT: RefCell<Option<Lot>> = const { RefCell::new(None) };
}

/// Whether this worker parks idle connections (until its stop).
pub(crate) fn open() -> bool {
    LOT.with_borrow(Option::is_some)
}

/// Parks an idle connection on this worker's lot. Where that fails (no lot,
/// or epoll refuses), the connection is closed: closing an idle keep-alive
/// connection is always allowed, and the client opens a new one.
pub(crate) fn park(parked: Parked) {
    LOT.with_borrow_mut(|lot| {
        let Some(lot) = lot else {
            return;
        };
        let index = lot.free_place();
        let data = epoll::EventData::new_u64(index as u64);
        let flags = epoll::EventFlags::IN | epoll::EventFlags::RDHUP;
        if epoll::add(lot.epoll(), parked.stream.as_fd(), data, flags).is_err() {
            lot.free.push(index);
            return;
        }
        *lot.place(index) = Some(parked);
        lot.parked = true;
    });
}

/// Sets up this worker's lot and watches it until [`stop`](crate::serve::stop) resolves; then
/// every parked connection is handed back to `resume` (to have its last
/// call like any idle connection) and parking ends. `resume` turns a
/// record back into a task. Each notification of `shed` closes this
/// worker's longest-idle connection, to make room at `--max-connections`
/// (`max_connections`, for the log). Must run on the worker's runtime.
pub(crate) async fn watch(
    stop: impl std::future::Future<Output = ()>,
    (shed, max_connections): (&tokio::sync::Notify, usize),
    resume: impl Fn(Parked),
) -> io::Result<()> {
    let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
    // SAFETY: the AsyncFd owns the descriptor and never replaces it.
    let watched = unsafe { AsyncFd::register_with_interest(epoll, Interest::READABLE) }
        .map_err(io::Error::from)?;
    LOT.with_borrow_mut(|lot| {
        *lot = Some(Lot {
            epoll: watched.as_raw_fd(),
            pages: Vec::new(),
            free: Vec::new(),
            parked: false,
        })
    });
    // However this ends (returned, or dropped with the runtime), the lot
    // goes before the descriptor it names is closed.
    let _clear = ClearLot;
    let mut events = Events(Vec::with_capacity(EVENTS));
    let mut sweep = tokio::time::interval(SWEEP_EVERY);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    loop {
        tokio::select! {
            ready = watched.readable() => {
                let mut ready = ready?;
                let events = &mut events.0;
                events.clear();
                let now = rustix::time::Timespec::default();
                let _ = epoll::wait(watched.get_ref(), spare_capacity(events), Some(&now));
                if events.len() < EVENTS {
                    ready.clear_ready();
                }
                for e in events.iter() {
                    if let Some(parked) = take(e.data.u64() as usize) {
                        resume(parked);
                    }
                }
            }
            _ = sweep.tick() => {
                if expire(Instant::now()) {
                    // What the parked connections' tasks and buffers held
                    // is free now, in holes between the records and
                    // other live allocations: given back to the kernel,
                    // an idle connection costs its record, not the pages
                    // around it. At most once a sweep, and only after
                    // parking, so a busy worker never pays for it.
                    crate::sys::release_free_heap();
                }
            }
            () = shed.notified() => {
                if shed_oldest() || shed_waiting() {
                    let at_max = Complaint::AtMaxConnections { max: max_connections };
                    complain("-", at_max);
                }
            }
            () = &mut stop => break,
        }
    }
    // Parking ends: every record goes back to a task, and the lot goes.
    let rest = LOT.with_borrow_mut(|lot| lot.take().map(|l| l.pages).unwrap_or_default());
    for page in rest {
        for parked in page.into_iter().flatten() {
            resume(parked);
        }
    }
    Ok(())
}

impl Lot {
    fn epoll(&self) -> BorrowedFd<'_> {
        // SAFETY: `watch` keeps the descriptor open while the lot exists.
        unsafe { BorrowedFd::borrow_raw(self.epoll) }
    }

    /// A free place's index, adding a page if none is free.
    fn free_place(&mut self) -> usize {
        if let Some(index) = self.free.pop() {
            return index;
        }
        let first = self.pages.len() * PAGE;
        self.pages.push(Box::new(std::array::from_fn(|_| None)));
        // Handed out lowest first.
        self.free.extend((first + 1..first + PAGE).rev());
        first
    }

    /// Place `index`; None if there is no such place.
    fn get(&mut self, index: usize) -> Option<&mut Option<Parked>> {
        self.pages
            .get_mut(index / PAGE)
            .map(|p| &mut p[index % PAGE])
    }

    fn place(&mut self, index: usize) -> &mut Option<Parked> {
        self.get(index).expect("a place handed out by free_place")
    }
}

/// Empties this worker's lot when dropped.
struct ClearLot;

impl Drop for ClearLot {
    fn drop(&mut self) {
        // Dropping records closes their connections.
        let lot = LOT.with_borrow_mut(Option::take);
        drop(lot);
    }
}

/// Takes record `index` off the lot and out of its epoll set.
fn take(index: usize) -> Option<Parked> {
    LOT.with_borrow_mut(|lot| {
        let lot = lot.as_mut()?;
        let parked = lot.get(index)?.take()?;
        let _ = epoll::delete(lot.epoll(), parked.stream.as_fd());
        lot.free.push(index);
        Some(parked)
    })
}

/// Closes this worker's longest-idle parked connection (all share one
/// keep-alive timeout, so it is the one with the earliest deadline), to
/// make room at `--max-connections`. False if none is parked here.
pub(crate) fn shed_oldest() -> bool {
    LOT.with_borrow_mut(|lot| {
        let Some(lot) = lot else {
            return false;
        };
        let places = lot.pages.iter().flat_map(|p| p.iter());
        let oldest = places
            .enumerate()
            .filter_map(|(index, r)| r.as_ref().map(|p| (p.deadline, index)))
            .min();
        let Some((_, index)) = oldest else {
            return false;
        };
        // Closing the socket takes it out of the epoll set.
        *lot.place(index) = None;
        lot.free.push(index);
        crate::metrics::count(crate::metrics::Event::ConnectionShed);
        true
    })
}

/// Closes the parked connections whose keep-alive timeout has passed.
/// Returns whether any connection was parked since the last call.
fn expire(now: Instant) -> bool {
    LOT.with_borrow_mut(|lot| {
        let Some(lot) = lot else {
            return false;
        };
        let places = lot.pages.iter_mut().flat_map(|p| p.iter_mut());
        for (index, record) in places.enumerate() {
            if record.as_ref().is_some_and(|p| p.deadline <= now) {
                // Closing the socket takes it out of the epoll set.
                *record = None;
                lot.free.push(index);
            }
        }
        std::mem::take(&mut lot.parked)
    })
}
