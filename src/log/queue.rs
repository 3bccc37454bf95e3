//! The bounded queue between the threads that log and the one thread that
//! writes the lines out (standalone mode). A worker never waits on a log
//! output itself: only when the output falls a whole queue behind does it
//! wait, for room. No line is dropped while the server runs; once a stop's
//! grace is over, lines that still find no room are given up on and
//! counted, so a blocked output cannot hold the process up.
//!
//! Lines are copied into a fixed buffer. The writer swaps it for its own,
//! empty one and writes what it took, each run of consecutive lines for
//! one destination in one write(2) where the output takes it all. Nothing
//! allocates once the queue exists, and one writer means lines never
//! interleave.

use std::io::{self, Write};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Where a line goes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Dest {
    Stderr,
    /// The `--log-file`, whichever file that name opens now.
    File,
}

/// The most changes of destination one buffer holds: a run is the lines
/// between two changes, so this bounds only how often access lines (to a
/// file) and diagnostics (to stderr) may alternate within one batch.
const MAX_RUNS: usize = 256;

/// How long the writer, woken by a line, lets more gather before it
/// writes: a log line is late by this much at most, and a busy server
/// wakes the writer this often at most.
const GATHER: Duration = Duration::from_millis(1);

/// How often lines an output refused are reported at most.
const REPORT_EVERY: Duration = Duration::from_secs(1);

/// What the writer writes to.
pub trait Sink {
    /// Writes all of `bytes`, consecutive lines for `dest`, calling
    /// `progress` with each part the output has taken.
    fn write_run(
        &mut self,
        dest: Dest,
        bytes: &[u8],
        progress: &mut dyn FnMut(&[u8]),
    ) -> io::Result<()>;
}

/// The most a pipe takes in one write(2) as a whole (PIPE_BUF): a write
/// no longer than this either all goes in or waits with nothing written.
pub const PIPE_ATOMIC: usize = 4096;

/// Writes all of `bytes`, whole lines, to `out`, calling `progress` with
/// each part written: `Write::write_all`, but telling how far it got.
/// `pipe`: `out` is a pipe or FIFO, written in pieces of whole lines of
/// at most PIPE_ATOMIC bytes (a longer line is a piece of its own): each
/// goes in whole or not at all, so a reader never sees part of a line
/// behind a writer that is stuck, and `progress` is exact about what a
/// stuck output holds.
pub fn write_reporting(
    out: &mut impl Write,
    bytes: &[u8],
    pipe: bool,
    progress: &mut dyn FnMut(&[u8]),
) -> io::Result<()> {
    let mut rest = bytes;
    while !rest.is_empty() {
        let piece = if pipe { &rest[..piece_end(rest)] } else { rest };
        write_piece(out, piece, progress)?;
        rest = &rest[piece.len()..];
    }
    Ok(())
}

/// Where the first piece of `bytes` ends: after the last newline within
/// PIPE_ATOMIC bytes, else after the first line, else at the end.
fn piece_end(bytes: &[u8]) -> usize {
    let head = &bytes[..bytes.len().min(PIPE_ATOMIC)];
    if head.len() == bytes.len() {
        return bytes.len();
    }
    match head.iter().rposition(|&b| b == b'\n') {
        Some(at) => at + 1,
        None => bytes
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |at| at + 1),
    }
}

fn write_piece(
    out: &mut impl Write,
    mut bytes: &[u8],
    progress: &mut dyn FnMut(&[u8]),
) -> io::Result<()> {
    while !bytes.is_empty() {
        match out.write(bytes) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                progress(&bytes[..n]);
                bytes = &bytes[n..];
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Lines in order, and the destination of each run of them.
pub struct Buffer {
    bytes: Vec<u8>,
    runs: Vec<Run>,
}

struct Run {
    dest: Dest,
    /// Where the run ends in `Buffer::bytes` (it starts where the one
    /// before ends).
    end: usize,
}

impl Buffer {
    fn with_capacity(bytes: usize) -> Buffer {
        Buffer {
            bytes: Vec::with_capacity(bytes),
            runs: Vec::with_capacity(MAX_RUNS),
        }
    }

    fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Whether `len` more bytes for `dest` fit without growing anything.
    fn fits(&self, dest: Dest, len: usize) -> bool {
        let same_run = self.runs.last().is_some_and(|r| r.dest == dest);
        self.bytes.len() + len <= self.bytes.capacity() && (same_run || self.runs.len() < MAX_RUNS)
    }

    fn push(&mut self, dest: Dest, text: &[u8]) {
        self.bytes.extend_from_slice(text);
        match self.runs.last_mut() {
            Some(run) if run.dest == dest => run.end = self.bytes.len(),
            _ => self.runs.push(Run {
                dest,
                end: self.bytes.len(),
            }),
        }
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.runs.clear();
    }
}

pub struct Queue {
    state: Mutex<State>,
    /// Emitters wait here for room.
    room: Condvar,
    /// The writer waits here for lines.
    work: Condvar,
    capacity: usize,
}

struct State {
    /// Lines waiting for the writer.
    pending: Buffer,
    /// Lines (newlines) in `pending`.
    waiting: u64,
    /// Lines the writer took and has not written yet.
    in_flight: u64,
    /// Where the writer is writing, if it is.
    writing: Option<Dest>,
    /// Lines given up on: no room after the stop's grace, or after `close`.
    given_up: u64,
    /// Set when a stop begins: from then on, emitters wait for room only
    /// until this instant.
    give_up_at: Option<Instant>,
    /// After `close`: nothing more is queued or written.
    closed: bool,
    /// Whether the writer waits on `work` and no one has woken it yet.
    writer_idle: bool,
    /// How many emitters wait on `room`.
    emitters_waiting: usize,
    /// Lines an output refused (an error such as ENOSPC, not a wait) and
    /// not yet reported, with the first refusal's output and error.
    refused: u64,
    refusal: Option<(Dest, io::ErrorKind, Option<i32>)>,
    /// When refused lines were last reported.
    reported_at: Option<Instant>,
    /// An output the last refusal cut inside a line: the next write to it
    /// ends that line first, so the lines after it stay whole.
    cut: Option<Dest>,
}

/// What `close` found.
#[derive(Debug, PartialEq, Eq)]
pub struct Closed {
    /// Lines queued or given up on and never written.
    pub unwritten: u64,
    /// Where the writer was still writing (stuck, most likely).
    pub writing: Option<Dest>,
}

/// The lines (newlines) in `text`.
fn lines(text: &[u8]) -> u64 {
    text.iter().filter(|&&b| b == b'\n').count() as u64
}

impl Queue {
    /// A queue that holds `capacity` bytes of lines (and the writer as
    /// many again, in the batch it writes).
    pub fn new(capacity: usize) -> Queue {
        Queue {
            state: Mutex::new(State {
                pending: Buffer::with_capacity(capacity),
                waiting: 0,
                in_flight: 0,
                writing: None,
                given_up: 0,
                give_up_at: None,
                closed: false,
                writer_idle: false,
                emitters_waiting: 0,
                refused: 0,
                refusal: None,
                reported_at: None,
                cut: None,
            }),
            room: Condvar::new(),
            work: Condvar::new(),
            capacity,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent at every unlock: a panic elsewhere
        // cannot leave it half-changed.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Queues `text`, whole lines for `dest`. When the queue is full it
    /// waits for room if `wait` (until the stop's grace is over, if a stop
    /// began). False: it was given up on, and counted as unwritten.
    pub fn push(&self, dest: Dest, text: &[u8], wait: bool) -> bool {
        if text.len() > self.capacity {
            // More than the queue holds (no access line is near this):
            // queued in pieces, in order.
            let mut all = true;
            for piece in text.chunks(self.capacity) {
                all &= self.push(dest, piece, wait);
            }
            return all;
        }
        let mut st = self.lock();
        loop {
            if !st.closed && st.pending.fits(dest, text.len()) {
                st.pending.push(dest, text);
                st.waiting += lines(text);
                if std::mem::take(&mut st.writer_idle) {
                    self.work.notify_one();
                }
                return true;
            }
            let now = Instant::now();
            let over = st.give_up_at.is_some_and(|at| now >= at);
            if st.closed || !wait || over {
                st.given_up += lines(text);
                return false;
            }
            st.emitters_waiting += 1;
            st = match st.give_up_at {
                Some(at) => {
                    let waited = self.room.wait_timeout(st, at - now);
                    waited.unwrap_or_else(|poisoned| poisoned.into_inner()).0
                }
                None => self
                    .room
                    .wait(st)
                    .unwrap_or_else(|poisoned| poisoned.into_inner()),
            };
            st.emitters_waiting -= 1;
        }
    }

    /// From now on, emitters wait for room for `grace` more at most.
    pub fn give_up_after(&self, grace: Duration) {
        let mut st = self.lock();
        st.give_up_at = Some(Instant::now() + grace);
        // Those waiting without a bound wait again with this one.
        self.room.notify_all();
    }

    /// The writer's loop: takes what is queued and writes it to `sink`,
    /// until the queue is closed.
    pub fn run_writer(&self, sink: &mut impl Sink) {
        let mut batch = Buffer::with_capacity(self.capacity);
        while self.take(&mut batch) {
            self.write(&batch, sink);
            batch.clear();
        }
    }

    /// Waits for lines and swaps all of them into `batch`, which must be
    /// empty. False once the queue is closed.
    fn take(&self, batch: &mut Buffer) -> bool {
        let mut st = self.lock();
        let mut waited = false;
        while st.pending.is_empty() && !st.closed {
            st.writer_idle = true;
            st = self
                .work
                .wait(st)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            waited = true;
        }
        st.writer_idle = false;
        if waited && !st.closed {
            // Woken by the first line after a quiet spell: more lines
            // gather for a moment, so that a busy server's lines go out
            // in batches, not a wake-up and a write(2) each.
            drop(st);
            std::thread::sleep(GATHER);
            st = self.lock();
        }
        if st.closed {
            return false;
        }
        std::mem::swap(&mut st.pending, batch);
        st.in_flight = std::mem::take(&mut st.waiting);
        if st.emitters_waiting > 0 {
            self.room.notify_all();
        }
        true
    }

    /// Writes `batch`, one run at a time, counting what went out. Lines an
    /// output refuses are lost, and said so on stderr (at most once per
    /// REPORT_EVERY).
    fn write(&self, batch: &Buffer, sink: &mut impl Sink) {
        let mut start = 0;
        for run in &batch.runs {
            let text = &batch.bytes[start..run.end];
            start = run.end;
            self.lock().writing = Some(run.dest);
            if self.lock().cut == Some(run.dest)
                && sink.write_run(run.dest, b"\n", &mut |_| {}).is_ok()
            {
                self.lock().cut = None;
            }
            let mut done = 0;
            let mut wrote = 0;
            let mut progress = |part: &[u8]| {
                let n = lines(part);
                done += n;
                wrote += part.len();
                self.lock().in_flight -= n;
            };
            // A line the output refuses (an error, not a wait) is lost, as
            // it would be written directly; it is not counted as blocked.
            if let Err(e) = sink.write_run(run.dest, text, &mut progress) {
                let mut st = self.lock();
                let lost = lines(text) - done;
                st.in_flight -= lost;
                st.refused += lost;
                if st.refusal.is_none() {
                    st.refusal = Some((run.dest, e.kind(), e.raw_os_error()));
                }
                if wrote > 0 && text[wrote - 1] != b'\n' {
                    st.cut = Some(run.dest);
                }
            }
        }
        self.lock().writing = None;
        self.report_refused(sink);
    }

    /// Says on stderr how many lines were lost since the last report.
    fn report_refused(&self, sink: &mut impl Sink) {
        let (n, (dest, kind, os)) = {
            let mut st = self.lock();
            let due = st.reported_at.is_none_or(|at| at.elapsed() >= REPORT_EVERY);
            let Some(refusal) = st.refusal.filter(|_| st.refused > 0 && due) else {
                return;
            };
            st.reported_at = Some(Instant::now());
            st.refusal = None;
            (std::mem::take(&mut st.refused), refusal)
        };
        let output = match dest {
            Dest::File => "access log",
            Dest::Stderr => "stderr",
        };
        let why = match os {
            Some(code) => io::Error::from_raw_os_error(code).to_string(),
            None => io::Error::from(kind).to_string(),
        };
        let line = format!("staticd: {output}: {n} lines not written: {why}\n");
        let _ = sink.write_run(Dest::Stderr, line.as_bytes(), &mut |_| {});
    }

    /// Ends the queue once what is queued is written or `deadline` passes
    /// (or the stop's grace is over, if that is later). Nothing is queued
    /// or written after it.
    pub fn close(&self, deadline: Instant) -> Closed {
        let deadline = match self.lock().give_up_at {
            Some(at) => at.max(deadline),
            None => deadline,
        };
        loop {
            let st = self.lock();
            let drained = st.waiting == 0 && st.in_flight == 0;
            if drained || Instant::now() >= deadline {
                break;
            }
            drop(st);
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut st = self.lock();
        st.closed = true;
        self.room.notify_all();
        self.work.notify_all();
        Closed {
            unwritten: st.given_up + st.waiting + st.in_flight,
            writing: st.writing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::sync::Arc;

    /// What a [`Collect`](crate::log::queue::Collect) was given, one entry per run.
    type Writes = Arc<Mutex<Vec<(Dest, Vec<u8>)>>>;

    /// Collects what it is given; `gate`, when set, must let each run
    /// through first.
    #[derive(Default)]
    struct Collect {
        writes: Writes,
        gate: Option<mpsc::Receiver<()>>,
    }

    impl Sink for Collect {
        fn write_run(
            &mut self,
            dest: Dest,
            bytes: &[u8],
            progress: &mut dyn FnMut(&[u8]),
        ) -> io::Result<()> {
            if let Some(gate) = &self.gate {
                if gate.recv().is_err() {
                    // The test is over: the output stays stuck.
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            self.writes.lock().unwrap().push((dest, bytes.to_vec()));
            progress(bytes);
            Ok(())
        }
    }

    fn writer(queue: &Arc<Queue>, sink: Collect) -> std::thread::JoinHandle<()> {
        let queue = Arc::clone(queue);
        let mut sink = sink;
        std::thread::spawn(move || queue.run_writer(&mut sink))
    }

    /// Every byte the sink was given, in order.
    fn written(writes: &Writes) -> Vec<u8> {
        let writes = writes.lock().unwrap();
        writes.iter().flat_map(|(_, b)| b.iter().copied()).collect()
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    /// A 64-byte queue whose writer is stuck on its first 32-byte line
    /// until `gate` lets it through, with two more lines queued: full. The
    /// line is the last value.
    fn stuck_and_full(
        fill: u8,
    ) -> (
        Arc<Queue>,
        mpsc::Sender<()>,
        Writes,
        std::thread::JoinHandle<()>,
        Vec<u8>,
    ) {
        let queue = Arc::new(Queue::new(64));
        let (open, gate) = mpsc::channel();
        let sink = Collect {
            gate: Some(gate),
            ..Collect::default()
        };
        let writes = Arc::clone(&sink.writes);
        let thread = writer(&queue, sink);
        let line = [fill; 31].iter().chain(b"\n").copied().collect::<Vec<u8>>();
        assert!(queue.push(Dest::Stderr, &line, true));
        while queue.lock().in_flight == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(queue.push(Dest::Stderr, &line, true));
        assert!(queue.push(Dest::Stderr, &line, true));
        (queue, open, writes, thread, line)
    }

    /// Takes `room` bytes of access lines, then refuses them with ENOSPC
    /// until `room` is raised; stderr always takes everything.
    struct Full {
        room: Arc<Mutex<usize>>,
        file: Arc<Mutex<Vec<u8>>>,
        stderr: Arc<Mutex<Vec<u8>>>,
    }

    impl Sink for Full {
        fn write_run(
            &mut self,
            dest: Dest,
            bytes: &[u8],
            progress: &mut dyn FnMut(&[u8]),
        ) -> io::Result<()> {
            if dest == Dest::Stderr {
                self.stderr.lock().unwrap().extend_from_slice(bytes);
                progress(bytes);
                return Ok(());
            }
            let mut room = self.room.lock().unwrap();
            let n = bytes.len().min(*room);
            *room -= n;
            self.file.lock().unwrap().extend_from_slice(&bytes[..n]);
            progress(&bytes[..n]);
            match n == bytes.len() {
                true => Ok(()),
                false => Err(io::Error::from_raw_os_error(28)),
            }
        }
    }

    #[test]
    fn lines_a_full_disk_refuses_are_reported_and_the_next_stay_whole() {
        let queue = Arc::new(Queue::new(1 << 16));
        let room = Arc::new(Mutex::new(10));
        let (file, stderr) = (Arc::default(), Arc::default());
        let sink = Full {
            room: Arc::clone(&room),
            file: Arc::clone(&file),
            stderr: Arc::clone(&stderr),
        };
        let thread = {
            let queue = Arc::clone(&queue);
            let mut sink = sink;
            std::thread::spawn(move || queue.run_writer(&mut sink))
        };
        // The first line is cut after 10 bytes, the second refused.
        assert!(queue.push(Dest::File, b"first line, cut\nsecond\n", true));
        while !String::from_utf8_lossy(&stderr.lock().unwrap()).contains("not written") {
            std::thread::sleep(Duration::from_millis(1));
        }
        *room.lock().unwrap() = 1 << 20;
        assert!(queue.push(Dest::File, b"third\n", true));
        assert_eq!(queue.close(soon()).unwritten, 0);
        thread.join().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&stderr.lock().unwrap()),
            "staticd: access log: 2 lines not written: No space left on device (os error 28)\n"
        );
        assert_eq!(&file.lock().unwrap()[..], b"first line\nthird\n");
    }

    #[test]
    fn lines_keep_their_order_and_runs_are_written_whole() {
        let queue = Arc::new(Queue::new(1 << 16));
        // Queued before the writer runs: one batch, three runs.
        assert!(queue.push(Dest::File, b"a1\n", true));
        assert!(queue.push(Dest::File, b"a2\na3\n", true));
        assert!(queue.push(Dest::Stderr, b"d1\n", true));
        assert!(queue.push(Dest::File, b"a4\n", true));
        let sink = Collect::default();
        let writes = Arc::clone(&sink.writes);
        let thread = writer(&queue, sink);
        assert_eq!(queue.close(soon()).unwritten, 0);
        thread.join().unwrap();
        let writes = writes.lock().unwrap();
        let got: Vec<(Dest, &[u8])> = writes.iter().map(|(d, b)| (*d, &b[..])).collect();
        assert_eq!(
            got,
            [
                (Dest::File, &b"a1\na2\na3\n"[..]),
                (Dest::Stderr, b"d1\n"),
                (Dest::File, b"a4\n")
            ]
        );
    }

    #[test]
    fn many_threads_lose_no_line_and_split_none() {
        let queue = Arc::new(Queue::new(4096));
        let sink = Collect::default();
        let writes = Arc::clone(&sink.writes);
        let thread = writer(&queue, sink);
        let emitters: Vec<_> = (0..4)
            .map(|t| {
                let queue = Arc::clone(&queue);
                std::thread::spawn(move || {
                    for i in 0..5000 {
                        let line = format!("thread {t} line {i} {}\n", "x".repeat(i % 300));
                        assert!(queue.push(Dest::Stderr, line.as_bytes(), true));
                    }
                })
            })
            .collect();
        for e in emitters {
            e.join().unwrap();
        }
        assert_eq!(queue.close(soon()).unwritten, 0);
        thread.join().unwrap();
        let all = written(&writes);
        let text = String::from_utf8(all).unwrap();
        let mut next = [0; 4];
        for line in text.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            let (t, i): (usize, usize) = (f[1].parse().unwrap(), f[3].parse().unwrap());
            assert_eq!(i, next[t], "thread {t}'s lines in order");
            assert_eq!(f[4].len(), i % 300, "line whole: {line:?}");
            next[t] += 1;
        }
        assert_eq!(next, [5000; 4]);
    }

    #[test]
    fn a_full_queue_waits_for_room_and_drops_nothing() {
        // The writer takes the first line and is stuck writing it; two
        // more fill the queue; the next must wait.
        let (queue, open, writes, thread, line) = stuck_and_full(b'x');
        assert!(!queue.push(Dest::Stderr, &line, false), "no room");
        let next = {
            let (queue, line) = (Arc::clone(&queue), line.clone());
            std::thread::spawn(move || queue.push(Dest::Stderr, &line, true))
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!next.is_finished(), "waits for room");
        for _ in 0..3 {
            open.send(()).unwrap();
        }
        assert!(next.join().unwrap());
        let closed = queue.close(soon());
        assert_eq!(closed.unwritten, 1, "the one pushed without waiting");
        thread.join().unwrap();
        assert_eq!(written(&writes).len(), 4 * 32);
    }

    #[test]
    fn after_the_grace_a_blocked_output_is_given_up_on() {
        let (queue, _open, _writes, _stuck, line) = stuck_and_full(b'y');
        // Waiting without a bound, until the stop comes with its grace.
        let waiting = {
            let (queue, line) = (Arc::clone(&queue), line.clone());
            std::thread::spawn(move || queue.push(Dest::Stderr, &line, true))
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiting.is_finished());
        let stop = Instant::now();
        queue.give_up_after(Duration::from_millis(100));
        assert!(!waiting.join().unwrap(), "given up on");
        let waited = stop.elapsed();
        assert!(waited >= Duration::from_millis(100), "{waited:?}");
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        // Closing waits no longer: the grace is over.
        let closed = queue.close(Instant::now());
        assert!(stop.elapsed() < Duration::from_secs(2));
        assert_eq!(
            closed,
            Closed {
                unwritten: 4,
                writing: Some(Dest::Stderr)
            }
        );
        assert!(!queue.push(Dest::Stderr, &line, true), "closed");
    }

    #[test]
    fn text_larger_than_the_queue_goes_in_pieces() {
        let queue = Arc::new(Queue::new(16));
        let sink = Collect::default();
        let writes = Arc::clone(&sink.writes);
        let thread = writer(&queue, sink);
        let text: Vec<u8> = b"0123456789abcdef0123456789\n".repeat(3);
        assert!(queue.push(Dest::File, &text, true));
        assert_eq!(queue.close(soon()).unwritten, 0);
        thread.join().unwrap();
        let all = written(&writes);
        assert_eq!(all, text);
    }

    #[test]
    fn write_reporting_tells_each_part() {
        /// Takes at most 3 bytes a write, and is interrupted once.
        struct Slow(Vec<u8>, bool);
        impl Write for Slow {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                if !std::mem::replace(&mut self.1, true) {
                    return Err(io::ErrorKind::Interrupted.into());
                }
                let n = b.len().min(3);
                self.0.extend_from_slice(&b[..n]);
                Ok(n)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut out = Slow(Vec::new(), false);
        let mut parts = Vec::new();
        write_reporting(&mut out, b"ab\ncd\n", false, &mut |p| {
            parts.push(p.to_vec())
        })
        .unwrap();
        assert_eq!(out.0, b"ab\ncd\n");
        assert_eq!(parts, [b"ab\n".to_vec(), b"cd\n".to_vec()]);
    }

    #[test]
    fn a_pipe_gets_whole_lines_of_at_most_pipe_buf() {
        let line = |len: usize| {
            let mut l = vec![b'x'; len - 1];
            l.push(b'\n');
            l
        };
        let mut text = Vec::new();
        for len in [1000, 2000, 1000, 5000, 10, 4096, 4096] {
            text.extend(line(len));
        }
        let mut out = Vec::new();
        let mut pieces = Vec::new();
        write_reporting(&mut out, &text, true, &mut |p| pieces.push(p.len())).unwrap();
        assert_eq!(out, text);
        // 1000+2000+1000 fit; the long line alone; 10 bytes cannot join
        // the next 4096; the last line ends the text.
        assert_eq!(pieces, [4000, 5000, 10, 4096, 4096]);
        let mut pieces = Vec::new();
        write_reporting(&mut Vec::new(), &text, false, &mut |p| pieces.push(p.len())).unwrap();
        assert_eq!(pieces, [text.len()]);
    }
}
