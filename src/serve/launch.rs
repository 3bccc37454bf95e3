//! The workers' start: every worker builds its runtime before any of them
//! accepts a connection.
//!
//! Started one after the other, the first worker to run accepted what the
//! kernel had queued and could take every descriptor the next one needed
//! for its runtime. That worker then could neither start nor give up (its
//! SO_REUSEPORT listener held connections the kernel had queued for it),
//! and retrying was worse under io_uring: tokio-uring keeps the tokio
//! runtime it built when the ring cannot be set up, so each try leaked a
//! few descriptors until none were left for anyone. Built before any
//! accept, the runtimes meet only the descriptors start-up itself took: a
//! limit too low for them is a start-up error, said in one line.

use std::io;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use crate::sys::{self, describe};

/// The workers' meeting point between building their runtimes and
/// accepting.
pub(crate) struct Launch {
    workers: usize,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// Workers that built their runtime, or could not.
    reported: usize,
    /// Why the first worker that could not build its runtime could not.
    failed: Option<String>,
    /// Set by the main thread once every worker reported: whether they go
    /// on to accept.
    go: Option<bool>,
}

impl Launch {
    pub(crate) fn new(workers: usize) -> Launch {
        Launch {
            workers,
            state: Mutex::default(),
            changed: Condvar::new(),
        }
    }

    /// On a worker's thread: builds its runtime with `build`, then waits
    /// until the main thread lets the workers go ([`Launch::open`]). None
    /// when this worker or another could not build its runtime (the
    /// server then does not start).
    pub(crate) fn runtime<T>(&self, build: impl FnOnce() -> io::Result<T>) -> Option<T> {
        // Reports even if `build` panics: the main thread waits for every worker.
        let mut report = Report {
            launch: self,
            failed: Some("cannot start a worker thread: it panicked".to_string()),
        };
        let built = build();
        report.failed = built.as_ref().err().map(failure);
        drop(report);
        let rt = built.ok()?;
        let state = self.wait_until(|s| s.go.is_some());
        (state.go == Some(true)).then_some(rt)
    }

    /// On the main thread: waits until every worker built its runtime;
    /// else why one could not.
    pub(crate) fn built(&self) -> Result<(), String> {
        let state = self.wait_until(|s| s.reported == self.workers);
        state.failed.clone().map_or(Ok(()), Err)
    }

    /// Lets the workers accept (`go`), or end at once.
    pub(crate) fn open(&self, go: bool) {
        self.lock().go = Some(go);
        self.changed.notify_all();
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The state, once `ready` holds of it.
    fn wait_until(&self, ready: impl Fn(&State) -> bool) -> MutexGuard<'_, State> {
        self.changed
            .wait_while(self.lock(), |s| !ready(s))
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// A worker's report that it built its runtime (`failed` None) or why not.
struct Report<'a> {
    launch: &'a Launch,
    failed: Option<String>,
}

impl Drop for Report<'_> {
    fn drop(&mut self) {
        let mut state = self.launch.lock();
        state.reported += 1;
        if state.failed.is_none() {
            state.failed = self.failed.take();
        }
        drop(state);
        self.launch.changed.notify_all();
    }
}

/// Why a worker's runtime could not be built, for the one-line start-up
/// error.
fn failure(e: &io::Error) -> String {
    format!(
        "cannot start a worker thread: {}{}",
        describe(e),
        sys::descriptor_hint(e)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn emfile() -> io::Error {
        io::Error::from_raw_os_error(libc::EMFILE)
    }

    #[test]
    fn workers_wait_until_every_runtime_is_built_and_the_main_thread_opens() {
        let launch = Arc::new(Launch::new(2));
        let workers: Vec<_> = (0..2)
            .map(|i| {
                let launch = Arc::clone(&launch);
                std::thread::spawn(move || launch.runtime(|| Ok(i)))
            })
            .collect();
        assert_eq!(launch.built(), Ok(()));
        launch.open(true);
        let got: Vec<_> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        assert_eq!(got, [Some(0), Some(1)]);
    }

    #[test]
    fn one_runtime_that_cannot_be_built_stops_every_worker() {
        let launch = Arc::new(Launch::new(2));
        let built = {
            let launch = Arc::clone(&launch);
            std::thread::spawn(move || launch.runtime(|| Ok(())))
        };
        let failed = {
            let launch = Arc::clone(&launch);
            std::thread::spawn(move || launch.runtime(|| Err::<(), _>(emfile())))
        };
        let why = launch.built().unwrap_err();
        assert!(why.starts_with("cannot start a worker thread: "), "{why}");
        assert!(
            why.contains("ulimit -n") && why.contains("--threads"),
            "{why}"
        );
        assert_eq!(failed.join().unwrap(), None);
        launch.open(false);
        assert_eq!(built.join().unwrap(), None);
    }

    #[test]
    fn a_panic_while_building_is_reported_rather_than_awaited() {
        let launch = Arc::new(Launch::new(1));
        let worker = {
            let launch = Arc::clone(&launch);
            std::thread::spawn(move || launch.runtime(|| -> io::Result<()> { panic!("boom") }))
        };
        assert!(worker.join().is_err());
        assert_eq!(
            launch.built(),
            Err("cannot start a worker thread: it panicked".to_string())
        );
    }
}
