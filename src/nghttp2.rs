//! nghttp2's HTTP/2 session behind a safe API: the one module of the
//! HTTP/2 engine with `unsafe` in it (fuzzed by fuzz/fuzz_targets/
//! h2_connection.rs, which drives a whole connection through it).
//!
//! nghttp2 is sans-IO the way rustls is: bytes go in with `receive`, frames
//! come out with `send`, and in between it calls back into a [`Handler`],
//! which owns everything the streams hold. Nothing here knows HTTP beyond
//! the frames; [`crate::h2session`] decides.
//!
//! # Invariants
//! - The handler lives in a heap allocation made by [`Session::new`](crate::nghttp2::Session::new)
//!   and freed by `Drop` after the nghttp2 session; nghttp2's `user_data` is that allocation's
//!   pointer, which never moves. Every access to the handler goes through this one raw pointer,
//!   never a `Box`, so the callbacks' `&mut H` and
//!   [`Session::handler`](crate::nghttp2::Session::handler)'s never coexist: the callbacks run only
//!   inside `nghttp2_session_mem_recv2` / `nghttp2_session_mem_send2`, which only `receive` and
//!   `send` call, and both take `&mut self` and hold no borrow of the handler across the call.
//! - Pointers nghttp2 passes to a callback (field names and values, DATA
//!   payloads, frame headers) are read only during that callback, as
//!   slices of the lengths it gives.
//! - A panic never unwinds into C: every callback catches it and fails the
//!   session (NGHTTP2_ERR_CALLBACK_FAILURE), so `receive` or `send` returns
//!   an error and the connection closes.
//! - nghttp2 allocates through Rust's global allocator (`MEM`), each
//!   block headed by its size, so that `free` and `realloc` can give
//!   `dealloc` the layout `alloc` was given (and tests/allocations.rs sees
//!   nghttp2's allocations too).
//! - `submit_*` copy what they are given (nghttp2 copies the fields of a
//!   response it is handed): nothing borrowed outlives the call.

use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};

use libnghttp2_sys as sys;

/// Error codes of RST_STREAM and GOAWAY (RFC 9113 §7).
pub mod code {
    pub const NO_ERROR: u32 = 0;
    pub const PROTOCOL_ERROR: u32 = 1;
    pub const INTERNAL_ERROR: u32 = 2;
    pub const REFUSED_STREAM: u32 = 7;
    pub const FLOW_CONTROL_ERROR: u32 = 3;
    pub const CANCEL: u32 = 8;
    pub const ENHANCE_YOUR_CALM: u32 = 11;
}

/// A frame that arrived whole, as far as the handler cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame {
    /// A request's head (HEADERS and its CONTINUATIONs) is complete;
    /// `end`: it has no body.
    Head { stream: i32, end: bool },
    /// A DATA frame; `end`: the last of the request's body.
    Data { stream: i32, end: bool },
    /// Trailers (a second HEADERS), ending the request's body.
    Trailers { stream: i32 },
    /// The client reset a stream.
    Reset { stream: i32, code: u32 },
    /// Anything else (SETTINGS, PING, WINDOW_UPDATE, PRIORITY, GOAWAY).
    Other,
}

/// The size of a response's next DATA frame, as the handler has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// `len` bytes go in the next frame (`send_body` then writes them);
    /// `last`: they end the body and the stream.
    Ready { len: usize, last: bool },
    /// Nothing yet (a script has not written more): `resume` once there is.
    Later,
    /// The body cannot be completed (the file shrank): reset the stream.
    Fail,
}

/// What the handler says after taking a DATA frame for the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Room for more frames this turn.
    More,
    /// The turn's output is full: `send` returns, and goes on next time.
    Full,
}

/// What a connection's streams are: nghttp2 calls these during `receive`
/// and `send`.
pub trait Handler {
    /// A client opened `stream` with a request head; Err(code) refuses it
    /// (RST_STREAM with the code).
    fn begin(&mut self, stream: i32) -> Result<(), u32>;
    /// One field of the head (pseudo-fields first, as nghttp2 checked
    /// them); Err(code) resets the stream with that code.
    fn field(&mut self, stream: i32, name: &[u8], value: &[u8]) -> Result<(), u32>;
    /// Part of a request body; returns how much of it to give back to the client's flow-control
    /// windows now (the rest: [`Session::consume`](crate::nghttp2::Session::consume)).
    fn data(&mut self, stream: i32, bytes: &[u8]) -> usize;
    fn frame(&mut self, frame: Frame);
    /// `stream` is closed (`code`: the reset's, or NO_ERROR); nghttp2
    /// forgets it after this.
    fn closed(&mut self, stream: i32, code: u32);
    /// How many bytes of `stream`'s body the next DATA frame carries, at
    /// most `max`.
    fn body(&mut self, stream: i32, max: usize) -> Body;
    /// The DATA frame `body` sized: its 9-byte `header`, then `len` bytes
    /// of the body, go to the wire now.
    fn send_body(&mut self, stream: i32, header: &[u8], len: usize) -> Flow;
    /// Frame bytes (anything but DATA payloads) for the wire.
    fn output(&mut self, bytes: &[u8]) -> Flow;
}

/// The limits a session is made with.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// SETTINGS_MAX_CONCURRENT_STREAMS as the client is told it. nghttp2
    /// answers a stream over its own limit with a connection error, where
    /// RFC 9113 §5.1.2 wants the stream refused; so nghttp2 is given
    /// `hard_streams` (higher) and the handler refuses streams over
    /// `max_streams` itself ([`Handler::begin`]).
    pub max_streams: u32,
    pub hard_streams: u32,
    /// Advertised as SETTINGS_MAX_HEADER_LIST_SIZE (the handler holds
    /// heads to it: nghttp2 does not).
    pub max_header_list: u32,
    /// Streams a client may reset in a burst, then per second, before
    /// nghttp2 sends GOAWAY (Rapid Reset).
    pub reset_burst: u64,
    pub reset_rate: u64,
}

/// nghttp2 failed the session: the connection is over (a GOAWAY, when
/// there is one to send, is already queued).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fatal(pub i32);

/// One server-side HTTP/2 session.
pub struct Session<H: Handler> {
    raw: NonNull<sys::nghttp2_session>,
    handler: NonNull<H>,
    /// Fields of the response being submitted, reused.
    nv: Vec<sys::nghttp2_nv>,
    /// Until the first SETTINGS goes out: the stream limit nghttp2 has
    /// (`Limits::hard_streams`) and the one the frame is to say.
    advertise: Option<(u32, u32)>,
}

// SAFETY: the session and its handler are owned by this value alone and
// reached only through `&mut self`; nghttp2 keeps no thread-local state,
// so moving the whole to another thread (a tokio worker) is sound. `nv`
// holds pointers only during `respond`.
unsafe impl<H: Handler + Send> Send for Session<H> {}

impl<H: Handler> Session<H> {
    /// A session that has queued its SETTINGS (sent by the first `send`).
    /// It expects the client's preface first.
    pub fn new(handler: H, limits: Limits) -> Session<H> {
        let handler = NonNull::from(Box::leak(Box::new(handler)));
        let mut raw = ptr::null_mut();
        // SAFETY: each out-pointer is written by the call that is given it
        // and checked before use; the callbacks and option objects are
        // copied by nghttp2_session_server_new2 and freed here after it;
        // `handler` outlives the session (see the module's invariants).
        unsafe {
            let mut callbacks = ptr::null_mut();
            assert_eq!(sys::nghttp2_session_callbacks_new(&mut callbacks), 0);
            set_callbacks::<H>(callbacks);
            let mut option = ptr::null_mut();
            assert_eq!(sys::nghttp2_option_new(&mut option), 0);
            // The handler gives flow control back as bodies are consumed
            // (a CGI script reads at its own pace).
            sys::nghttp2_option_set_no_auto_window_update(option, 1);
            sys::nghttp2_option_set_stream_reset_rate_limit(
                option,
                limits.reset_burst,
                limits.reset_rate,
            );
            // The flood bounds, at nghttp2's own defaults, said here so that
            // they are ours (tests/http2_attacks.rs): SETTINGS entries per
            // frame, queued PING/SETTINGS acknowledgements (a client that
            // sends them and never reads), CONTINUATION frames per header
            // block, and "glitches" (frames that do nothing: empty DATA,
            // WINDOW_UPDATE on closed streams, unknown-stream RST_STREAM...)
            // per burst and second before GOAWAY(ENHANCE_YOUR_CALM).
            sys::nghttp2_option_set_max_settings(option, 32);
            sys::nghttp2_option_set_max_outbound_ack(option, 1000);
            sys::nghttp2_option_set_max_continuations(option, 8);
            sys::nghttp2_option_set_glitch_rate_limit(option, 1000, 33);
            let mut mem = MEM;
            // nghttp2 copies `mem` into the session.
            let made = sys::nghttp2_session_server_new3(
                &mut raw,
                callbacks,
                handler.as_ptr().cast(),
                option,
                &mut mem,
            );
            sys::nghttp2_option_del(option);
            sys::nghttp2_session_callbacks_del(callbacks);
            // Only out of memory fails here, which Rust would abort on too.
            assert_eq!(made, 0, "nghttp2_session_server_new2");
        }
        let mut session = Session {
            raw: NonNull::new(raw).expect("nghttp2 session"),
            handler,
            nv: Vec::with_capacity(16),
            advertise: Some((limits.hard_streams, limits.max_streams)),
        };
        session.settings(limits);
        session
    }

    fn settings(&mut self, limits: Limits) {
        let entries = [
            sys::nghttp2_settings_entry {
                settings_id: sys::NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS as i32,
                value: limits.hard_streams,
            },
            sys::nghttp2_settings_entry {
                settings_id: sys::NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE as i32,
                value: limits.max_header_list,
            },
        ];
        // SAFETY: the entries are read during the call only.
        let rv = unsafe {
            sys::nghttp2_submit_settings(
                self.raw.as_ptr(),
                sys::NGHTTP2_FLAG_NONE as u8,
                entries.as_ptr(),
                entries.len(),
            )
        };
        debug_assert_eq!(rv, 0);
    }

    /// The handler, between calls into nghttp2.
    pub fn handler(&mut self) -> &mut H {
        // SAFETY: no callback runs now (see the module's invariants), so
        // this is the only reference to the handler.
        unsafe { self.handler.as_mut() }
    }

    /// Takes bytes from the client; the handler hears of what they hold.
    /// Returns how many were taken (all, unless a callback failed).
    pub fn receive(&mut self, bytes: &[u8]) -> Result<usize, Fatal> {
        // SAFETY: `bytes` is valid for the call; callbacks see the handler
        // through user_data only.
        let n = unsafe {
            sys::nghttp2_session_mem_recv2(self.raw.as_ptr(), bytes.as_ptr(), bytes.len())
        };
        if n < 0 {
            return Err(Fatal(n as i32));
        }
        Ok(n as usize)
    }

    /// Hands the handler every frame nghttp2 has to send (`output`, and
    /// DATA through `body`/`send_body`), until there is none or the
    /// handler says the turn is full.
    pub fn send(&mut self) -> Result<(), Fatal> {
        loop {
            let mut data = ptr::null();
            // SAFETY: `data` is set by the call to bytes that stay valid
            // until the next call into the session; they are copied out
            // before that.
            let n = unsafe { sys::nghttp2_session_mem_send2(self.raw.as_ptr(), &mut data) };
            if n < 0 {
                return Err(Fatal(n as i32));
            }
            if n == 0 {
                return Ok(());
            }
            // SAFETY: nghttp2 gave `n` bytes at `data`, valid until the
            // next call into it.
            let bytes = unsafe { std::slice::from_raw_parts(data, n as usize) };
            let flow = match self.advertise.take() {
                Some(limits) => {
                    let mut frame = bytes.to_vec();
                    advertise(&mut frame, limits);
                    self.handler().output(&frame)
                }
                None => self.handler().output(bytes),
            };
            if flow == Flow::Full {
                return Ok(());
            }
        }
    }

    /// Submits a response head on `stream`: `fields` in order, `:status` first; `body`: DATA
    /// follows (sized by [`Handler::body`]), else the head ends the
    /// stream.
    pub fn respond<'a>(
        &mut self,
        stream: i32,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        body: bool,
    ) -> Result<(), Fatal> {
        self.nv.clear();
        for (name, value) in fields {
            self.nv.push(sys::nghttp2_nv {
                name: name.as_ptr().cast_mut(),
                value: value.as_ptr().cast_mut(),
                namelen: name.len(),
                valuelen: value.len(),
                flags: sys::NGHTTP2_NV_FLAG_NONE as u8,
            });
        }
        let provider = sys::nghttp2_data_provider2 {
            source: sys::nghttp2_data_source {
                ptr: ptr::null_mut(),
            },
            read_callback: Some(read_body::<H>),
        };
        let provider = if body {
            &provider as *const _
        } else {
            ptr::null()
        };
        // SAFETY: nghttp2 copies the fields (no NO_COPY flags) and the
        // provider during the call; the borrowed slices outlive it.
        let rv = unsafe {
            sys::nghttp2_submit_response2(
                self.raw.as_ptr(),
                stream,
                self.nv.as_ptr(),
                self.nv.len(),
                provider,
            )
        };
        self.nv.clear();
        match rv {
            0 => Ok(()),
            e => Err(Fatal(e)),
        }
    }

    /// A body that said [`Body::Later`] has more now.
    pub fn resume(&mut self, stream: i32) {
        // SAFETY: plain call; an unknown stream is an error nghttp2 returns.
        unsafe { sys::nghttp2_session_resume_data(self.raw.as_ptr(), stream) };
    }

    /// Resets `stream` with `code`.
    pub fn reset(&mut self, stream: i32, code: u32) {
        // SAFETY: plain call.
        unsafe {
            sys::nghttp2_submit_rst_stream(
                self.raw.as_ptr(),
                sys::NGHTTP2_FLAG_NONE as u8,
                stream,
                code,
            )
        };
    }

    /// Queues GOAWAY with `code` naming `last` the last stream processed:
    /// once it is sent, nghttp2 closes the client's streams above it
    /// (refused: the client may send them again), those at or below it may
    /// finish. nghttp2's own count would name every stream whose HEADERS
    /// began, though its head never ended and nothing was done for it.
    pub fn goaway(&mut self, last: i32, code: u32) {
        // SAFETY: plain call; no opaque data is passed.
        unsafe {
            sys::nghttp2_submit_goaway(
                self.raw.as_ptr(),
                sys::NGHTTP2_FLAG_NONE as u8,
                last,
                code,
                ptr::null(),
                0,
            );
        }
    }

    /// Queues GOAWAY with `code` naming `last` the last stream processed
    /// (as `goaway`), and ends the session once it is sent: nothing more
    /// is read, no stream finishes.
    pub fn terminate(&mut self, last: i32, code: u32) {
        // SAFETY: plain call.
        unsafe { sys::nghttp2_session_terminate_session2(self.raw.as_ptr(), last, code) };
    }

    /// Gives `n` bytes of `stream`'s flow-control window back to the
    /// client (and the connection's), once its body was taken.
    pub fn consume(&mut self, stream: i32, n: usize) {
        // SAFETY: plain call; a stream already closed only consumes the
        // connection's window.
        unsafe {
            if sys::nghttp2_session_consume(self.raw.as_ptr(), stream, n) != 0 {
                sys::nghttp2_session_consume_connection(self.raw.as_ptr(), n);
            }
        }
    }

    /// How much `stream` may send now by the client's window for it; None
    /// for a stream nghttp2 does not have open.
    pub fn send_window(&self, stream: i32) -> Option<i32> {
        // SAFETY: read-only queries; the stream pointer is only tested.
        unsafe {
            if sys::nghttp2_session_find_stream(self.raw.as_ptr(), stream).is_null() {
                return None;
            }
            Some(sys::nghttp2_session_get_stream_remote_window_size(
                self.raw.as_ptr(),
                stream,
            ))
        }
    }

    /// Whether nghttp2 still wants the client's bytes.
    pub fn wants_read(&self) -> bool {
        // SAFETY: a read-only query.
        unsafe { sys::nghttp2_session_want_read(self.raw.as_ptr()) != 0 }
    }

    /// Whether nghttp2 has frames to send (DATA deferred or held by flow
    /// control aside).
    pub fn wants_write(&self) -> bool {
        // SAFETY: a read-only query.
        unsafe { sys::nghttp2_session_want_write(self.raw.as_ptr()) != 0 }
    }
}

impl<H: Handler> Drop for Session<H> {
    fn drop(&mut self) {
        // SAFETY: the session is freed first (it may call back while it
        // tears down streams: on_stream_close is not called by del, but
        // nothing may reach the handler after it is freed), then the
        // handler, which was made by Box::leak in `new`.
        unsafe {
            sys::nghttp2_session_del(self.raw.as_ptr());
            drop(Box::from_raw(self.handler.as_ptr()));
        }
    }
}

/// nghttp2's allocator: Rust's global one, each block headed by its size.
const MEM: sys::nghttp2_mem = sys::nghttp2_mem {
    mem_user_data: ptr::null_mut(),
    malloc: Some(mem_malloc),
    free: Some(mem_free),
    calloc: Some(mem_calloc),
    realloc: Some(mem_realloc),
};

/// The size header; 16 keeps the blocks aligned as malloc's are.
const HEADER: usize = 16;

fn layout(total: usize) -> Option<std::alloc::Layout> {
    std::alloc::Layout::from_size_align(total, HEADER).ok()
}

/// Blocks up to this size (header included) are kept on a per-thread free
/// list by size class once freed, so that a warm thread's streams allocate
/// nothing: nghttp2 makes a handful of small allocations per stream. The
/// largest is a response's copy of its fields (40 bytes a field, then the
/// names and values): about 600 bytes for a plain file, more with
/// `_headers` fields, so the classes go to 2 KiB.
const CLASSES: [usize; 6] = [64, 128, 256, 512, 1024, 2048];
/// Free blocks kept per class and thread.
const KEPT: usize = 256;

/// Free blocks by class (see [`CLASSES`]), each `CLASSES[i]` bytes with
/// alignment [`HEADER`].
struct Spare([Vec<NonNull<u8>>; CLASSES.len()]);

impl Drop for Spare {
    fn drop(&mut self) {
        for (class, blocks) in CLASSES.iter().zip(&mut self.0) {
            for block in blocks.drain(..) {
                if let Some(layout) = layout(*class) {
                    // SAFETY: every kept block was allocated with this
                    // class's layout and is owned by the list alone.
                    unsafe { std::alloc::dealloc(block.as_ptr(), layout) };
                }
            }
        }
    }
}

thread_local! {
    static SPARE: std::cell::RefCell<Spare> =
        const { std::cell::RefCell::new(Spare([const { Vec::new() }; CLASSES.len()])) };
}

/// The size a block of `total` bytes is allocated with.
fn rounded(total: usize) -> usize {
    CLASSES
        .iter()
        .copied()
        .find(|&c| total <= c)
        .unwrap_or(total)
}

unsafe extern "C" fn mem_malloc(size: usize, _: *mut c_void) -> *mut c_void {
    let Some(total) = size.checked_add(HEADER).map(rounded) else {
        return ptr::null_mut();
    };
    let class = CLASSES.iter().position(|&c| c == total);
    let kept = class.and_then(|i| {
        SPARE
            .try_with(|s| s.try_borrow_mut().ok().and_then(|mut s| s.0[i].pop()))
            .ok()
            .flatten()
    });
    let base = match kept {
        Some(block) => block.as_ptr(),
        None => {
            let Some(layout) = layout(total) else {
                return ptr::null_mut();
            };
            // SAFETY: the layout is non-zero in size.
            std::alloc::alloc(layout)
        }
    };
    if base.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: the header lies inside the block, which is aligned for usize.
    base.cast::<usize>().write(total);
    base.add(HEADER).cast()
}

unsafe extern "C" fn mem_free(p: *mut c_void, _: *mut c_void) {
    if p.is_null() {
        return;
    }
    // SAFETY: `p` came from mem_malloc/mem_realloc: its header holds the
    // size the block was allocated with.
    let base = p.cast::<u8>().sub(HEADER);
    let total = base.cast::<usize>().read();
    if let Some(i) = CLASSES.iter().position(|&c| c == total) {
        let block = NonNull::new(base);
        let kept = SPARE.try_with(|s| {
            let Ok(mut s) = s.try_borrow_mut() else {
                return false;
            };
            match block {
                Some(block) if s.0[i].len() < KEPT => {
                    s.0[i].push(block);
                    true
                }
                _ => false,
            }
        });
        if kept == Ok(true) {
            return;
        }
    }
    if let Some(layout) = layout(total) {
        std::alloc::dealloc(base, layout);
    }
}

unsafe extern "C" fn mem_calloc(n: usize, size: usize, user: *mut c_void) -> *mut c_void {
    let Some(total) = n.checked_mul(size) else {
        return ptr::null_mut();
    };
    let p = mem_malloc(total, user);
    if !p.is_null() {
        p.cast::<u8>().write_bytes(0, total);
    }
    p
}

unsafe extern "C" fn mem_realloc(p: *mut c_void, size: usize, user: *mut c_void) -> *mut c_void {
    if p.is_null() {
        return mem_malloc(size, user);
    }
    let (Some(total), base) = (size.checked_add(HEADER), p.cast::<u8>().sub(HEADER)) else {
        return ptr::null_mut();
    };
    let old = base.cast::<usize>().read();
    if total <= old {
        return p;
    }
    if CLASSES.contains(&old) || CLASSES.contains(&rounded(total)) {
        // Into a new block (a kept one, or of its class), then the old one
        // freed (kept, if of a class).
        let grown = mem_malloc(size, user);
        if !grown.is_null() {
            ptr::copy_nonoverlapping(p.cast::<u8>(), grown.cast::<u8>(), old - HEADER);
            mem_free(p, user);
        }
        return grown;
    }
    let Some(old_layout) = layout(old) else {
        return ptr::null_mut();
    };
    // SAFETY: `base` was allocated with `old_layout`; on failure the old
    // block is left as it was, as realloc(3) does.
    let grown = std::alloc::realloc(base, old_layout, total);
    if grown.is_null() {
        return ptr::null_mut();
    }
    grown.cast::<usize>().write(total);
    grown.add(HEADER).cast()
}

/// Rewrites the value of SETTINGS_MAX_CONCURRENT_STREAMS in a SETTINGS
/// frame from `hard` to `told` (see `Limits::max_streams`).
fn advertise(frame: &mut [u8], (hard, told): (u32, u32)) {
    if frame.len() < 9 || u32::from(frame[3]) != sys::NGHTTP2_SETTINGS {
        return;
    }
    for entry in frame[9..].chunks_exact_mut(6) {
        let id = u16::from_be_bytes([entry[0], entry[1]]);
        let value = u32::from_be_bytes([entry[2], entry[3], entry[4], entry[5]]);
        if u32::from(id) == sys::NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS && value == hard {
            entry[2..6].copy_from_slice(&told.to_be_bytes());
        }
    }
}

/// Runs a callback's body with the handler, never unwinding into C.
///
/// # Safety
/// `user_data` is the handler's pointer [`Session::new`](crate::nghttp2::Session::new) gave
/// nghttp2, and nothing else refers to the handler while nghttp2 runs a callback.
unsafe fn with<H: Handler, R>(user_data: *mut c_void, failed: R, f: impl FnOnce(&mut H) -> R) -> R {
    let handler = &mut *user_data.cast::<H>();
    catch_unwind(AssertUnwindSafe(|| f(handler))).unwrap_or(failed)
}

const FAILURE: c_int = sys::NGHTTP2_ERR_CALLBACK_FAILURE;

unsafe fn set_callbacks<H: Handler>(cb: *mut sys::nghttp2_session_callbacks) {
    sys::nghttp2_session_callbacks_set_on_begin_headers_callback(cb, Some(on_begin_headers::<H>));
    sys::nghttp2_session_callbacks_set_on_header_callback(cb, Some(on_header::<H>));
    sys::nghttp2_session_callbacks_set_on_frame_recv_callback(cb, Some(on_frame_recv::<H>));
    sys::nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, Some(on_data::<H>));
    sys::nghttp2_session_callbacks_set_on_stream_close_callback(cb, Some(on_stream_close::<H>));
    sys::nghttp2_session_callbacks_set_send_data_callback(cb, Some(send_data::<H>));
}

unsafe extern "C" fn on_begin_headers<H: Handler>(
    session: *mut sys::nghttp2_session,
    frame: *const sys::nghttp2_frame,
    user_data: *mut c_void,
) -> c_int {
    let hd = (*frame).hd;
    if u32::from(hd.type_) != sys::NGHTTP2_HEADERS
        || (*frame).headers.cat != sys::NGHTTP2_HCAT_REQUEST
    {
        return 0;
    }
    match with::<H, _>(user_data, Err(code::INTERNAL_ERROR), |h| {
        h.begin(hd.stream_id)
    }) {
        Ok(()) => 0,
        Err(code) => {
            // The header block is still decoded (HPACK's table stays in
            // step); its fields are not passed on.
            sys::nghttp2_submit_rst_stream(
                session,
                sys::NGHTTP2_FLAG_NONE as u8,
                hd.stream_id,
                code,
            );
            sys::NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE
        }
    }
}

unsafe extern "C" fn on_header<H: Handler>(
    session: *mut sys::nghttp2_session,
    frame: *const sys::nghttp2_frame,
    name: *const u8,
    namelen: usize,
    value: *const u8,
    valuelen: usize,
    _flags: u8,
    user_data: *mut c_void,
) -> c_int {
    let stream = (*frame).hd.stream_id;
    let name = std::slice::from_raw_parts(name, namelen);
    let value = std::slice::from_raw_parts(value, valuelen);
    match with::<H, _>(user_data, Err(code::INTERNAL_ERROR), |h| {
        h.field(stream, name, value)
    }) {
        Ok(()) => 0,
        Err(code) => {
            sys::nghttp2_submit_rst_stream(session, sys::NGHTTP2_FLAG_NONE as u8, stream, code);
            sys::NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE
        }
    }
}

unsafe extern "C" fn on_frame_recv<H: Handler>(
    _session: *mut sys::nghttp2_session,
    frame: *const sys::nghttp2_frame,
    user_data: *mut c_void,
) -> c_int {
    let hd = (*frame).hd;
    let end = hd.flags & sys::NGHTTP2_FLAG_END_STREAM as u8 != 0;
    let stream = hd.stream_id;
    let seen = match u32::from(hd.type_) {
        sys::NGHTTP2_HEADERS if (*frame).headers.cat == sys::NGHTTP2_HCAT_REQUEST => {
            Frame::Head { stream, end }
        }
        sys::NGHTTP2_HEADERS => Frame::Trailers { stream },
        sys::NGHTTP2_DATA => Frame::Data { stream, end },
        sys::NGHTTP2_RST_STREAM => Frame::Reset {
            stream,
            code: (*frame).rst_stream.error_code,
        },
        _ => Frame::Other,
    };
    with::<H, _>(user_data, FAILURE, |h| {
        h.frame(seen);
        0
    })
}

unsafe extern "C" fn on_data<H: Handler>(
    session: *mut sys::nghttp2_session,
    _flags: u8,
    stream: i32,
    data: *const u8,
    len: usize,
    user_data: *mut c_void,
) -> c_int {
    let bytes = std::slice::from_raw_parts(data, len);
    let Some(done) = with::<H, _>(user_data, None, |h| Some(h.data(stream, bytes))) else {
        return FAILURE;
    };
    if done > 0 && sys::nghttp2_session_consume(session, stream, done) != 0 {
        sys::nghttp2_session_consume_connection(session, done);
    }
    0
}

unsafe extern "C" fn on_stream_close<H: Handler>(
    _session: *mut sys::nghttp2_session,
    stream: i32,
    code: u32,
    user_data: *mut c_void,
) -> c_int {
    with::<H, _>(user_data, FAILURE, |h| {
        h.closed(stream, code);
        0
    })
}

unsafe extern "C" fn read_body<H: Handler>(
    _session: *mut sys::nghttp2_session,
    stream: i32,
    _buf: *mut u8,
    max: usize,
    flags: *mut u32,
    _source: *mut sys::nghttp2_data_source,
    user_data: *mut c_void,
) -> sys::nghttp2_ssize {
    match with::<H, _>(user_data, Body::Fail, |h| h.body(stream, max)) {
        Body::Ready { len, last } => {
            // The payload never goes through nghttp2's buffer: `send_data`
            // writes it.
            *flags |= sys::NGHTTP2_DATA_FLAG_NO_COPY;
            if last {
                *flags |= sys::NGHTTP2_DATA_FLAG_EOF;
            }
            len.min(max) as sys::nghttp2_ssize
        }
        Body::Later => sys::NGHTTP2_ERR_DEFERRED as sys::nghttp2_ssize,
        Body::Fail => sys::NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE as sys::nghttp2_ssize,
    }
}

unsafe extern "C" fn send_data<H: Handler>(
    _session: *mut sys::nghttp2_session,
    frame: *mut sys::nghttp2_frame,
    header: *const u8,
    len: usize,
    _source: *mut sys::nghttp2_data_source,
    user_data: *mut c_void,
) -> c_int {
    // Padding is only ever added when a select_padding callback asks for
    // it, and there is none.
    debug_assert_eq!((*frame).data.padlen, 0);
    let stream = (*frame).hd.stream_id;
    let header = std::slice::from_raw_parts(header, 9);
    match with::<H, _>(user_data, None, |h| Some(h.send_body(stream, header, len))) {
        Some(Flow::More) => 0,
        Some(Flow::Full) => sys::NGHTTP2_ERR_PAUSE,
        None => FAILURE,
    }
}
