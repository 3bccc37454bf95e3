//! Per-thread free lists of the buffers one request needs: response heads,
//! access-log lines and read buffers here; the modules that own other
//! kinds (body chunk lists, log size fields) keep their lists beside them,
//! so this module depends on nothing above it.
//!
//! A buffer goes back to its list when the thing holding it is dropped, so
//! once a thread is warm, serving a cached file allocates nothing, and a
//! connection that is idle holds none of them.

use std::cell::RefCell;

/// Buffers kept per thread and kind; more are freed.
const KEEP: usize = 64;
/// Buffers that grew past this (a big pipelined batch, a long listing)
/// are freed rather than kept.
const MAX_KEPT_BYTES: usize = 64 * 1024;

/// Something that can be emptied and used again.
pub trait Reusable: Default {
    fn reset(&mut self);
    /// Bytes held, to decide whether keeping it is worth it.
    fn held(&self) -> usize;
}

impl Reusable for String {
    fn reset(&mut self) {
        self.clear();
    }
    fn held(&self) -> usize {
        self.capacity()
    }
}

impl<T> Reusable for Vec<T> {
    fn reset(&mut self) {
        // Drops the items now: body chunks may hold files open.
        self.clear();
    }
    fn held(&self) -> usize {
        self.capacity() * std::mem::size_of::<T>()
    }
}

impl Reusable for Box<[u8]> {
    /// A block keeps its bytes: whoever takes it overwrites what it uses.
    fn reset(&mut self) {}
    fn held(&self) -> usize {
        self.len()
    }
}

/// One free list.
pub struct FreeList<T>(RefCell<Vec<T>>);

impl<T: Reusable> FreeList<T> {
    pub(crate) const fn new() -> FreeList<T> {
        FreeList(RefCell::new(Vec::new()))
    }

    /// An empty buffer, reused when one is free.
    pub fn take(&self) -> T {
        self.0.borrow_mut().pop().unwrap_or_default()
    }

    /// Keeps `item` for the next `take`, unless it holds nothing or too much.
    pub fn give(&self, mut item: T) {
        let held = item.held();
        if held == 0 || held > MAX_KEPT_BYTES {
            return;
        }
        item.reset();
        let mut list = self.0.borrow_mut();
        if list.len() < KEEP {
            list.push(item);
        }
    }
}

thread_local! {
    /// Response heads (and small bodies riding with them).
    pub static HEADS: FreeList<Vec<u8>> = const { FreeList::new() };
    /// Access-log lines.
    pub static LINES: FreeList<String> = const { FreeList::new() };
    /// Read buffers of connections with something to read.
    pub static READS: FreeList<Vec<u8>> = const { FreeList::new() };
    /// File blocks being copied out with `--no-sendfile`.
    pub static BLOCKS: FreeList<Box<[u8]>> = const { FreeList::new() };
}

/// `list.take()` on this thread's list.
pub fn take<T: Reusable>(list: &'static std::thread::LocalKey<FreeList<T>>) -> T {
    // During thread teardown the list may be gone: then allocate afresh.
    list.try_with(FreeList::take).unwrap_or_default()
}

/// `list.give(item)` on this thread's list.
pub fn give<T: Reusable>(list: &'static std::thread::LocalKey<FreeList<T>>, item: T) {
    let _ = list.try_with(|l| l.give(item));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_empty_with_their_capacity() {
        let mut v = take(&HEADS);
        v.extend_from_slice(b"hello");
        let cap = v.capacity();
        give(&HEADS, v);
        let again = take(&HEADS);
        assert!(again.is_empty());
        assert_eq!(again.capacity(), cap);
    }

    #[test]
    fn big_and_empty_buffers_are_not_kept() {
        give(&LINES, String::new());
        give(&LINES, String::with_capacity(MAX_KEPT_BYTES + 1));
        assert_eq!(take(&LINES).capacity(), 0);
    }
}
