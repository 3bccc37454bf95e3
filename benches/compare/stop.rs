//! The run's stop signal: SIGINT, SIGTERM or SIGHUP asks every part to
//! finish what it is doing and give up the rest, so that the servers are
//! stopped and what was measured is written. Set by the signal handler
//! alone; read by every loop that can take long.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set by SIGINT/SIGTERM/SIGHUP: finish the current run, stop every
/// server, write what was measured.
static STOP: AtomicBool = AtomicBool::new(false);

/// Whether the run is being interrupted.
pub fn stopping() -> bool {
    STOP.load(Ordering::SeqCst)
}

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

pub fn install_signal_handlers() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}
