//! `Basic-Auth` in `_headers`: Netlify's password protection of the paths a
//! block's pattern matches.
//!
//! ```text
//! /admin/*
//!   Basic-Auth: alice:hunter2 bob:correct-horse
//! ```
//!
//! The line is an instruction to the server, never a response field: it is
//! kept here, apart from the fields, as the block's [`Lock`], and
//! [`crate::auth`] checks a request's credentials against the locks it meets.
//! Nothing here compares passwords, and no message quotes one.
//!
//! A lock fails closed: a `Basic-Auth` line whose pairs are all malformed
//! still protects its paths (no one can log in), and `! Basic-Auth` cannot
//! open what another block protects.

use std::fmt;
use std::sync::Arc;

use super::pattern::Pattern;

/// The field name (compared regardless of case).
pub const NAME: &str = "Basic-Auth";

/// Most `user:password` pairs one block holds: every request under a lock
/// compares its credentials with each of them.
pub const MAX_PAIRS: usize = 100;

/// The `Basic-Auth` lines of one block.
#[derive(Debug)]
pub struct Lock {
    block: u16,
    /// The block's pattern as written, escaped for a quoted-string: the
    /// realm of the 401's challenge.
    realm: Box<str>,
    /// Who may pass, in file order.
    pairs: Vec<Pair>,
}

/// One `user:password` of a `Basic-Auth` value.
pub struct Pair {
    user: Arc<str>,
    password: Box<[u8]>,
}

/// A password never shows, not even in a debug dump of the rules.
impl fmt::Debug for Pair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pair")
            .field("user", &self.user)
            .field("password", &"<hidden>")
            .finish()
    }
}

impl Pair {
    /// The user, as the access log names them.
    pub fn user(&self) -> &Arc<str> {
        &self.user
    }

    pub fn password(&self) -> &[u8] {
        &self.password
    }
}

impl Lock {
    /// An empty lock for `block`, whose pattern reads [`pattern`](crate::rules::pattern): no one
    /// can pass until pairs are added.
    pub(super) fn new(block: u16, pattern: &str) -> Lock {
        Lock {
            block,
            realm: crate::http::escape_quoted(pattern).into(),
            pairs: Vec::new(),
        }
    }

    pub(super) fn block(&self) -> u16 {
        self.block
    }

    /// The realm of the challenge (already escaped).
    pub fn realm(&self) -> &str {
        &self.realm
    }

    pub fn pairs(&self) -> &[Pair] {
        &self.pairs
    }

    /// Adds the pairs of one `Basic-Auth` value (pairs separated by
    /// spaces, each `user:password`, the first `:` ending the user). What
    /// is wrong with it comes back as one message, which names no password;
    /// the good pairs are kept all the same.
    pub(super) fn add(&mut self, value: &str, pattern: &str) -> Result<(), String> {
        let mut problems = Vec::new();
        let (mut malformed, mut over) = (0, 0);
        for entry in value.split_ascii_whitespace() {
            let Some(pair) = parse_pair(entry) else {
                malformed += 1;
                continue;
            };
            if self.pairs.len() == MAX_PAIRS {
                over += 1;
                continue;
            }
            self.pairs.push(pair);
        }
        if malformed > 0 {
            problems.push(format!(
                "{malformed} {} not user:password (both non-empty) and ignored",
                if malformed == 1 {
                    "entry is"
                } else {
                    "entries are"
                }
            ));
        }
        if over > 0 {
            problems.push(format!(
                "more than {MAX_PAIRS} users in one block; {over} ignored"
            ));
        }
        if !cfg!(feature = "auth") {
            problems.push(format!(
                "this staticd is built without the feature auth: no one can log in under {pattern}"
            ));
        } else if self.pairs.is_empty() {
            problems.push(format!("no one can log in under {pattern}"));
        }
        if problems.is_empty() {
            return Ok(());
        }
        Err(format!("{NAME}: {}", problems.join("; ")))
    }
}

/// `user:password`, both non-empty and without control characters.
fn parse_pair(entry: &str) -> Option<Pair> {
    let (user, password) = entry.split_once(':')?;
    let fine = |s: &str| !s.is_empty() && !s.chars().any(char::is_control);
    (fine(user) && fine(password)).then(|| Pair {
        user: user.into(),
        password: password.as_bytes().into(),
    })
}

/// The locks of one file that a request meets: those whose block's pattern
/// matches its host and path. Finding them allocates nothing.
#[derive(Clone, Copy)]
pub struct Locks<'r, 'a> {
    locks: &'r [Lock],
    blocks: &'r [Pattern],
    host: Option<&'a str>,
    path: &'a [u8],
}

impl<'r, 'a> Locks<'r, 'a> {
    /// No locks: a site without `_headers`, or a request that reached none.
    pub fn none() -> Locks<'r, 'a> {
        Locks {
            locks: &[],
            blocks: &[],
            host: None,
            path: b"",
        }
    }

    pub(super) fn new(
        locks: &'r [Lock],
        blocks: &'r [Pattern],
        host: Option<&'a str>,
        path: &'a [u8],
    ) -> Locks<'r, 'a> {
        Locks {
            locks,
            blocks,
            host,
            path,
        }
    }

    /// Each lock the request meets, in file order.
    pub fn iter(&self) -> impl Iterator<Item = &'r Lock> + use<'r, 'a> {
        let Locks {
            locks,
            blocks,
            host,
            path,
        } = *self;
        locks.iter().filter(move |lock| {
            blocks
                .get(usize::from(lock.block))
                .is_some_and(|pattern| pattern.matches(host, path).is_some())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock(values: &[&str]) -> (Lock, Vec<String>) {
        let mut lock = Lock::new(0, "/a\"b/*");
        let errors = values
            .iter()
            .filter_map(|v| lock.add(v, "/a\"b/*").err())
            .collect();
        (lock, errors)
    }

    fn users(lock: &Lock) -> Vec<(&str, &[u8])> {
        lock.pairs()
            .iter()
            .map(|p| (&**p.user(), p.password()))
            .collect()
    }

    #[test]
    fn pairs_split_on_spaces_and_the_first_colon() {
        let (lock, errors) = lock(&["alice:hunter2  bob:a:b\tcarol:p\u{e9}"]);
        // Without the feature every lock says that no one can log in.
        assert_eq!(errors.is_empty(), cfg!(feature = "auth"), "{errors:?}");
        assert_eq!(
            users(&lock),
            [
                ("alice", &b"hunter2"[..]),
                ("bob", b"a:b"),
                ("carol", "p\u{e9}".as_bytes())
            ]
        );
        assert_eq!(lock.realm(), "/a\\\"b/*");
    }

    #[test]
    fn malformed_pairs_are_dropped_and_named_without_their_password() {
        let (lock, errors) = lock(&["alice:secret1 nocolon :secret2 bob: ok:fine"]);
        assert_eq!(users(&lock), [("alice", &b"secret1"[..]), ("ok", b"fine")]);
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("3 entries"), "{errors:?}");
        for secret in ["secret", "nocolon", "bob"] {
            assert!(!errors[0].contains(secret), "{errors:?}");
        }
    }

    #[test]
    fn a_lock_without_pairs_stays_shut_and_says_so() {
        let (lock, errors) = lock(&["", "nocolon"]);
        assert!(lock.pairs().is_empty());
        assert_eq!(errors.len(), 2);
        assert!(
            errors.iter().all(|e| e.contains("no one can log in")),
            "{errors:?}"
        );
    }

    #[test]
    fn pairs_past_the_limit_are_reported() {
        let many: Vec<String> = (0..MAX_PAIRS + 3).map(|i| format!("u{i}:p{i}")).collect();
        let (lock, errors) = lock(&[&many.join(" ")]);
        assert_eq!(lock.pairs().len(), MAX_PAIRS);
        assert!(errors[0].contains("3 ignored"), "{errors:?}");
    }

    #[test]
    fn debug_hides_passwords() {
        let (lock, _) = lock(&["alice:hunter2"]);
        let shown = format!("{lock:?}");
        assert!(
            shown.contains("alice") && !shown.contains("hunter2"),
            "{shown}"
        );
    }
}
