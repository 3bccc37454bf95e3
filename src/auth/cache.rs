//! Credentials already verified, so that bcrypt's cost (tens of
//! milliseconds on purpose) is paid once per user and password, not once
//! per request. Only successes are kept. An entry is a SHA-256 of the
//! file's generation, the user and the password: a changed file starts a
//! new generation, so its old entries never match again.

use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Entries kept; the oldest goes first. Each is 32 bytes and a name, and
/// every lookup compares all of them.
pub const CAPACITY: usize = 256;

pub type Key = [u8; 32];

/// What identifies one set of credentials checked against one version of
/// one file. Lengths go in first, so no two different (user, password)
/// pairs hash the same bytes.
pub fn key(generation: u64, user: &[u8], password: &[u8]) -> Key {
    let mut h = Sha256::new();
    h.update(generation.to_le_bytes());
    h.update((user.len() as u64).to_le_bytes());
    h.update(user);
    h.update(password);
    h.finalize().into()
}

#[derive(Default)]
pub struct Verified {
    ring: Mutex<Ring>,
}

#[derive(Default)]
struct Ring {
    entries: Vec<(Key, Arc<str>)>,
    /// Where the next entry goes once the ring is full.
    next: usize,
}

impl Verified {
    /// The user name stored with `key`. Every entry is compared in
    /// constant time, so the time taken says nothing of which matched.
    pub fn get(&self, key: &Key) -> Option<Arc<str>> {
        let ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        let mut found = None;
        for (k, user) in &ring.entries {
            if bool::from(k.ct_eq(key)) {
                found = Some(user);
            }
        }
        found.cloned()
    }

    pub fn insert(&self, key: Key, user: Arc<str>) {
        let mut ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        if ring.entries.len() < CAPACITY {
            ring.entries.push((key, user));
            return;
        }
        let slot = ring.next;
        if let Some(entry) = ring.entries.get_mut(slot) {
            *entry = (key, user);
        }
        ring.next = (slot + 1) % CAPACITY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_separate_generation_user_and_password() {
        let k = key(1, b"ab", b"c");
        assert_eq!(k, key(1, b"ab", b"c"));
        assert_ne!(k, key(2, b"ab", b"c"));
        assert_ne!(k, key(1, b"a", b"bc"));
        assert_ne!(k, key(1, b"ab", b"d"));
    }

    #[test]
    fn bounded_oldest_out_first() {
        let cache = Verified::default();
        let name: Arc<str> = "u".into();
        for i in 0..CAPACITY as u64 + 1 {
            cache.insert(key(i, b"u", b"p"), name.clone());
        }
        assert!(cache.get(&key(0, b"u", b"p")).is_none(), "the oldest went");
        for i in 1..=CAPACITY as u64 {
            assert_eq!(cache.get(&key(i, b"u", b"p")).as_deref(), Some("u"), "{i}");
        }
        assert!(cache.get(&key(CAPACITY as u64 + 1, b"u", b"p")).is_none());
    }
}
