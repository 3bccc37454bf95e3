//! The `Basic-Auth` locks of a site's `_headers` (Netlify's password
//! protection; parsed by [`crate::rules::locks`]), checked against a
//! request's credentials.
//!
//! Every lock a request meets must let the same credentials through: a
//! block can protect a path further, never open what another protects.
//! Passwords are compared in constant time: the SHA-256 of what was sent is
//! compared with that of every pair of the lock, all of them, so the time
//! taken says neither which pair matched, nor how much of a password was
//! right, nor how long it is. Nothing is cached and nothing is allocated.

use std::sync::Arc;

use subtle::ConstantTimeEq;

use super::basic::{self, Credentials};
use super::cache;
use super::Check;
use crate::rules::locks::{Lock, Locks};

/// Whether the credentials of an Authorization field value (if any) open
/// every lock the request meets: Open when it meets none, else the user of
/// the pair that matched, or the realm of the first lock that stays shut.
pub fn check<'r>(locks: Locks<'r, '_>, authorization: Option<&[u8]>) -> Check<'r> {
    let mut meets = locks.iter().peekable();
    if meets.peek().is_none() {
        return Check::Open;
    }
    let credentials = authorization.and_then(basic::decode);
    let mut user = None;
    for lock in meets {
        match credentials.as_ref().and_then(|c| opens(lock, c)) {
            Some(who) => user = Some(who),
            None => {
                return Check::Denied {
                    realm: lock.realm(),
                }
            }
        }
    }
    user.map_or(Check::Open, |user| Check::Granted { user })
}

/// The user of the pair of `lock` these credentials are, if one is.
fn opens(lock: &Lock, credentials: &Credentials) -> Option<Arc<str>> {
    let sent = digest(credentials.user(), credentials.password());
    let mut found = None;
    for pair in lock.pairs() {
        let same = digest(pair.user().as_bytes(), pair.password()).ct_eq(&sent);
        if bool::from(same) {
            found = Some(pair.user());
        }
    }
    found.cloned()
}

/// What a user and password are compared by: the cache's key, which keeps
/// the two apart (its generation is of no use here).
fn digest(user: &[u8], password: &[u8]) -> cache::Key {
    cache::key(0, user, password)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::HeaderRules;

    fn rules(text: &str) -> HeaderRules {
        HeaderRules::parse(text.as_bytes(), &mut |_, _| {})
    }

    fn basic(user_password: &str) -> String {
        use base64::Engine;
        let token = base64::engine::general_purpose::STANDARD.encode(user_password);
        format!("Basic {token}")
    }

    fn ask<'r>(rules: &'r HeaderRules, path: &str, authorization: Option<&str>) -> Check<'r> {
        check(
            rules.locks(None, path.as_bytes()),
            authorization.map(str::as_bytes),
        )
    }

    const FILE: &str = "/admin/*\n  Basic-Auth: alice:hunter2 bob:b:c\n\
        /admin/deep/*\n  Basic-Auth: alice:hunter2\n\
        /shut/*\n  Basic-Auth: nocolon\n";

    #[test]
    fn each_pair_opens_its_lock_and_nothing_else_does() {
        let rules = rules(FILE);
        assert_eq!(ask(&rules, "/public", None), Check::Open);
        assert_eq!(ask(&rules, "/admin", None), Check::Open);
        let granted = |user: &str| Check::Granted { user: user.into() };
        let path = "/admin/x.html";
        assert_eq!(
            ask(&rules, path, Some(&basic("alice:hunter2"))),
            granted("alice")
        );
        assert_eq!(ask(&rules, path, Some(&basic("bob:b:c"))), granted("bob"));
        let denied = Check::Denied { realm: "/admin/*" };
        for wrong in [
            basic("alice:hunter"),
            basic("alice:hunter22"),
            basic("Alice:hunter2"),
            basic("bob:b"),
            basic("alice:b:c"),
            basic(":hunter2"),
            "Bearer x".to_string(),
            "Basic !!".to_string(),
        ] {
            assert_eq!(ask(&rules, path, Some(&wrong)), denied, "{wrong}");
        }
        assert_eq!(ask(&rules, path, None), denied);
    }

    #[test]
    fn every_lock_met_must_open() {
        let rules = rules(FILE);
        let path = "/admin/deep/x";
        let alice = basic("alice:hunter2");
        assert_eq!(
            ask(&rules, path, Some(&alice)),
            Check::Granted {
                user: "alice".into()
            }
        );
        // bob opens /admin/*, not /admin/deep/*.
        assert_eq!(
            ask(&rules, path, Some(&basic("bob:b:c"))),
            Check::Denied {
                realm: "/admin/deep/*"
            }
        );
    }

    #[test]
    fn a_lock_without_pairs_never_opens() {
        let rules = rules(FILE);
        for authorization in [None, Some(basic("nocolon:")), Some(basic("alice:hunter2"))] {
            assert_eq!(
                ask(&rules, "/shut/x", authorization.as_deref()),
                Check::Denied { realm: "/shut/*" }
            );
        }
    }
}
