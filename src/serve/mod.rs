//! Transports: they move bytes between a socket (or stdin/stdout) and a
//! `Session`, and decide nothing about HTTP.

pub mod cgi_exchange;
pub mod event_loop;
pub mod listen;
pub mod stdio;
#[cfg(feature = "uring")]
pub mod uring;
pub mod writer;

use std::time::{Duration, Instant};

/// After closing our side with unread client data around, keep reading for
/// at most this long, so that the client receives our last response before
/// the kernel would reset the connection over the unread bytes.
const LINGER: Duration = Duration::from_secs(2);

fn linger_deadline() -> Instant {
    Instant::now() + LINGER
}
