//! Apache htpasswd files: `user:hash` lines, `#` comments and blank lines.
//!
//! Only salted, slow hashes are accepted: bcrypt (`$2y$`, `$2a$`, `$2b$`),
//! SHA-crypt (`$5$`, `$6$`) and, because old files are full of it, Apache's
//! MD5 variant `$apr1$`. Unsalted `{SHA}`, crypt(3) DES and plaintext are
//! refused when the file is read, with the file and line: the user on such a
//! line is kept, but can never log in (so a later line cannot stand in for
//! it). Every hash is verified by a crate, never here; this module checks
//! each hash's shape first, so that a crate only ever sees a well-formed one
//! (crypt3_rs underflows on control characters in a salt, for one).

use std::collections::HashMap;
use std::sync::Arc;

use sha_crypt::{PasswordVerifier, ShaCrypt};
use subtle::ConstantTimeEq;

/// Bytes of a file read; the rest is ignored with one message.
pub const MAX_FILE_BYTES: usize = 1 << 20;
/// Users kept from one file; more are ignored with one message.
pub const MAX_USERS: usize = 10_000;
/// Longest user name, as Apache's htpasswd allows.
pub const MAX_USER_BYTES: usize = 255;
/// bcrypt costs Apache's htpasswd offers (-C 4 to 17): each step doubles the
/// time, and a worker thread waits for it on every failed login.
const BCRYPT_COSTS: std::ops::RangeInclusive<u32> = 4..=17;
/// SHA-crypt rounds accepted: glibc's minimum, and a ceiling at which one
/// verification still takes well under a second.
const SHA_ROUNDS: std::ops::RangeInclusive<u32> = 1_000..=1_000_000;
/// Messages about single lines, per read of a file; the rest are counted.
const MAX_REPORTED: usize = 20;

/// The alphabet of crypt(3) salts and checksums.
fn is_crypt64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'.' || b == b'/'
}

fn all_crypt64(s: &str) -> bool {
    s.bytes().all(is_crypt64)
}

/// The hash kinds accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    Bcrypt,
    ShaCrypt,
    Apr1,
}

/// A well-formed hash of an accepted kind.
#[derive(Clone, Debug)]
pub struct Hash {
    scheme: Scheme,
    text: Box<str>,
}

impl Hash {
    /// Checks `text`'s kind and shape; the error says why it is refused
    /// (without repeating the text, which may be a plaintext password).
    pub fn parse(text: &str) -> Result<Hash, String> {
        let scheme = classify(text)?;
        Ok(Hash {
            scheme,
            text: text.into(),
        })
    }

    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// Whether `password` hashes to this. Slow on purpose (bcrypt, the
    /// rounds): call it without holding a lock.
    pub fn verify(&self, password: &[u8]) -> bool {
        match self.scheme {
            // bcrypt compares in constant time itself, and reads at most
            // the first 72 bytes, as every bcrypt does.
            Scheme::Bcrypt => bcrypt::verify(password, &self.text).unwrap_or(false),
            // So does sha-crypt (ctutils).
            Scheme::ShaCrypt => ShaCrypt::default()
                .verify_password(password, &*self.text)
                .is_ok(),
            Scheme::Apr1 => apr1_verify(password, &self.text),
        }
    }
}

/// crypt3_rs recomputes the whole hash string from the stored one's salt;
/// the comparison with the stored string is done here in constant time
/// (crypt3_rs's own `verify` uses `==`).
fn apr1_verify(password: &[u8], stored: &str) -> bool {
    #[allow(deprecated)] // deprecated for new passwords, not for checking old ones
    let Ok(computed) = crypt3_rs::crypt::apr1::hash_with(stored, password) else {
        return false;
    };
    computed.as_str().as_bytes().ct_eq(stored.as_bytes()).into()
}

/// Which accepted kind `text` is, or why it is refused.
fn classify(text: &str) -> Result<Scheme, String> {
    let refused = |what: &str| Err(format!("{what} is not accepted"));
    if let Some(rest) = ["$2y$", "$2a$", "$2b$"]
        .iter()
        .find_map(|id| text.strip_prefix(id))
    {
        return bcrypt_shape(rest).map(|()| Scheme::Bcrypt);
    }
    if let Some(rest) = text.strip_prefix("$5$") {
        return sha_crypt_shape(rest, 43).map(|()| Scheme::ShaCrypt);
    }
    if let Some(rest) = text.strip_prefix("$6$") {
        return sha_crypt_shape(rest, 86).map(|()| Scheme::ShaCrypt);
    }
    if let Some(rest) = text.strip_prefix("$apr1$") {
        return apr1_shape(rest).map(|()| Scheme::Apr1);
    }
    if text.starts_with("{SHA}") {
        return refused("an unsalted SHA-1 hash ({SHA})");
    }
    if text.starts_with("$1$") {
        return refused("an MD5-crypt hash ($1$)");
    }
    if text.starts_with('$') {
        return refused("this kind of $-hash");
    }
    if text.len() == 13 && all_crypt64(text) {
        return refused("a crypt(3) DES hash");
    }
    Err("not a bcrypt, SHA-crypt or apr1 hash (plaintext?)".to_string())
}

/// After `$2y$`: `NN$` and 53 characters (22 of salt, 31 of checksum).
fn bcrypt_shape(rest: &str) -> Result<(), String> {
    let malformed = || Err("a malformed bcrypt hash".to_string());
    let Some((cost, salted)) = rest.split_once('$') else {
        return malformed();
    };
    if cost.len() != 2 || !cost.bytes().all(|b| b.is_ascii_digit()) {
        return malformed();
    }
    if salted.len() != 53 || !all_crypt64(salted) {
        return malformed();
    }
    let cost: u32 = cost.parse().map_err(|_| "a malformed bcrypt hash")?;
    if !BCRYPT_COSTS.contains(&cost) {
        return Err(format!(
            "bcrypt cost {cost} is outside {} to {}",
            BCRYPT_COSTS.start(),
            BCRYPT_COSTS.end()
        ));
    }
    Ok(())
}

/// After `$5$` or `$6$`: `[rounds=N$]salt$checksum`.
fn sha_crypt_shape(rest: &str, checksum_len: usize) -> Result<(), String> {
    let malformed = || Err("a malformed SHA-crypt hash".to_string());
    let mut fields: Vec<&str> = rest.split('$').collect();
    if fields.len() == 3 {
        let rounds = fields.remove(0);
        let Some(n) = rounds.strip_prefix("rounds=") else {
            return malformed();
        };
        if n.is_empty() || n.len() > 10 || !n.bytes().all(|b| b.is_ascii_digit()) {
            return malformed();
        }
        let n: u64 = n.parse().map_err(|_| "a malformed SHA-crypt hash")?;
        if !SHA_ROUNDS.contains(&u32::try_from(n).unwrap_or(u32::MAX)) {
            return Err(format!(
                "SHA-crypt rounds={n} is outside {} to {}",
                SHA_ROUNDS.start(),
                SHA_ROUNDS.end()
            ));
        }
    }
    match fields.as_slice() {
        [salt, checksum]
            if (1..=16).contains(&salt.len())
                && all_crypt64(salt)
                && checksum.len() == checksum_len
                && all_crypt64(checksum) =>
        {
            Ok(())
        }
        _ => malformed(),
    }
}

/// After `$apr1$`: up to 8 characters of salt, `$`, 22 of checksum.
fn apr1_shape(rest: &str) -> Result<(), String> {
    match rest.split_once('$') {
        Some((salt, checksum))
            if (1..=8).contains(&salt.len())
                && all_crypt64(salt)
                && checksum.len() == 22
                && all_crypt64(checksum) =>
        {
            Ok(())
        }
        _ => Err("a malformed apr1 hash".to_string()),
    }
}

/// One user of a file. `hash` is None when the line's hash was refused:
/// that user cannot log in.
#[derive(Debug)]
pub struct Entry {
    pub user: Arc<str>,
    pub hash: Option<Hash>,
}

/// The users of one htpasswd file, in file order.
#[derive(Debug, Default)]
pub struct Table {
    entries: Vec<Entry>,
}

impl Table {
    /// Reads `bytes` (the file `name`), sending one line per problem to
    /// `report`, each naming `name` and the line. Never fails: what cannot
    /// be used is reported and left out (or kept as a user who cannot log
    /// in).
    pub fn parse(bytes: &[u8], name: &str, report: &mut dyn FnMut(&str)) -> Table {
        let mut reporter = Reporter {
            name,
            report,
            lines: 0,
        };
        let body = bounded(bytes, &mut reporter);
        let mut entries: Vec<Entry> = Vec::new();
        let mut first_seen: HashMap<Arc<str>, usize> = HashMap::new();
        for (index, raw) in body.split(|&b| b == b'\n').enumerate() {
            let number = index + 1;
            let Some((user, hash)) = parse_line(raw, number, &mut reporter) else {
                continue;
            };
            if let Some(first) = first_seen.get(user) {
                reporter.line(
                    number,
                    &format!("user {user:?} again (first on line {first}): this line is ignored"),
                );
                continue;
            }
            if entries.len() == MAX_USERS {
                (reporter.report)(&format!(
                    "{name}:{number}: more than {MAX_USERS} users: this line and the rest are ignored"
                ));
                break;
            }
            let hash = match Hash::parse(hash) {
                Ok(hash) => Some(hash),
                Err(why) => {
                    reporter.line(
                        number,
                        &format!("user {user:?}: {why}; this user cannot log in until the password is set again (htpasswd -B)"),
                    );
                    None
                }
            };
            let user: Arc<str> = user.into();
            first_seen.insert(user.clone(), number);
            entries.push(Entry { user, hash });
        }
        reporter.finish();
        Table { entries }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every user, in file order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry for `user`. Every name is compared, in constant time for
    /// names of the same length, so how long this takes says nothing about
    /// which names exist or where they are.
    pub fn find(&self, user: &[u8]) -> Option<&Entry> {
        let mut found = None;
        for entry in &self.entries {
            let same: bool = entry.user.as_bytes().ct_eq(user).into();
            if same && found.is_none() {
                found = Some(entry);
            }
        }
        found
    }

    /// A hash to verify against when the user is unknown or cannot log in,
    /// so that such an answer takes as long as a wrong password.
    pub fn decoy(&self) -> Option<&Hash> {
        self.entries.iter().find_map(|e| e.hash.as_ref())
    }
}

/// Reports per line, at most [`MAX_REPORTED`] of them, then a count.
struct Reporter<'a> {
    name: &'a str,
    report: &'a mut dyn FnMut(&str),
    lines: usize,
}

impl Reporter<'_> {
    fn line(&mut self, number: usize, what: &str) {
        self.lines += 1;
        if self.lines <= MAX_REPORTED {
            (self.report)(&format!("{}:{number}: {what}", self.name));
        }
    }

    fn finish(&mut self) {
        if self.lines > MAX_REPORTED {
            let more = self.lines - MAX_REPORTED;
            (self.report)(&format!(
                "{}: {more} more lines with problems not shown",
                self.name
            ));
        }
    }
}

/// The first [`MAX_FILE_BYTES`] of `bytes`, cut after the last whole line.
fn bounded<'a>(bytes: &'a [u8], reporter: &mut Reporter) -> &'a [u8] {
    let Some(head) = bytes.get(..MAX_FILE_BYTES) else {
        return bytes;
    };
    if bytes.len() == MAX_FILE_BYTES {
        return bytes;
    }
    (reporter.report)(&format!(
        "{}: larger than {} KiB: only the lines within the first {} KiB are read",
        reporter.name,
        MAX_FILE_BYTES / 1024,
        MAX_FILE_BYTES / 1024
    ));
    let end = head.iter().rposition(|&b| b == b'\n').unwrap_or(0);
    &head[..end]
}

/// A `user:hash` line as its two parts; None for comments, blank lines and
/// lines that are reported. As Apache does, the line is trimmed and the hash
/// ends at a further `:` (what follows it is ignored).
fn parse_line<'a>(
    raw: &'a [u8],
    number: usize,
    reporter: &mut Reporter,
) -> Option<(&'a str, &'a str)> {
    let Ok(line) = std::str::from_utf8(raw) else {
        reporter.line(number, "not UTF-8: this line is ignored");
        return None;
    };
    let line = line.trim_matches(|c: char| c.is_ascii_whitespace());
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let Some((user, rest)) = line.split_once(':') else {
        reporter.line(number, "not a user:hash line: ignored");
        return None;
    };
    if user.is_empty() || user.len() > MAX_USER_BYTES || user.chars().any(char::is_control) {
        reporter.line(
            number,
            &format!("a user name must have 1 to {MAX_USER_BYTES} bytes and no control characters: this line is ignored"),
        );
        return None;
    }
    let hash = rest.split(':').next().unwrap_or(rest);
    Some((user, hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Made with `htpasswd -nb[B|m|2|5]` (Apache 2.4), openssl passwd and
    // Python's crypt (libxcrypt): each verified by a crate here, never
    // computed by this crate's tests.
    const BCRYPT_2Y: &str = "$2y$04$NyCJjL9f28.T9MaSU4P/xuzh84p2ka/GPsteiJqQlV9a3HUuepmEi"; // correct horse
    const BCRYPT_2Y_EMPTY: &str = "$2y$04$Jzu1u475clQFJTl.Uw8Gv.NnK.BOPFVOfIzXh44d0.10g/a1vicXG"; // ""
    const BCRYPT_2A: &str = "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"; // U*U
    const BCRYPT_2B: &str = "$2b$04$VQE5YVTxe5xu4xar4J7h8uUSER2OtVLWvjmm8Cn7wLM1bD2VrD7R6"; // tr0ub4dor
    const APR1: &str = "$apr1$WNU5/TRs$f.pwrh2Sr3wmOapxmfjiM/"; // hunter2
    const APR1_UTF8: &str = "$apr1$zI393Dqs$jYzRGQl.5K6ts5.clYmfd1"; // pässwörd
    const SHA256: &str = "$5$mYGLTjcyIOp3366B$r5SxrHEkqKPVj.xUHXz/LWgBqsotbBQb9aAyuLaJDh1"; // s3cret:with:colons
    const SHA256_OPENSSL: &str = "$5$saltsalt$hcyDOxdIg0p3xyqtpHh/v8Ph.am06tQaovp1KpEklb7"; // x
    const SHA512: &str = "$6$I1bpM8YAJIcq7Aw7$KLtSXC2R0OT2saz4caZSL0Ay4QBswtosmrOf9DQ4QHBAiAAOM7273GzmixPf1cJiHN5vC/Znoh8LoqhUO42g20"; // pässwörd
    const SHA512_ROUNDS: &str = "$6$rounds=1000$3x.bWqrqM61hZlN/$H/jdqgUO8ctJHz/OcPfrXGwwDiglUcacaufuqqmTOFCrcJnYhZFC90UgMVHFXe2f51G5u5ln7SSRiqMVukftn0"; // h

    fn verifies(hash: &str, password: &str) -> bool {
        Hash::parse(hash).unwrap().verify(password.as_bytes())
    }

    #[test]
    fn every_kind_with_its_password() {
        for (hash, password, scheme) in [
            (BCRYPT_2Y, "correct horse", Scheme::Bcrypt),
            (BCRYPT_2Y_EMPTY, "", Scheme::Bcrypt),
            (BCRYPT_2A, "U*U", Scheme::Bcrypt),
            (BCRYPT_2B, "tr0ub4dor", Scheme::Bcrypt),
            (APR1, "hunter2", Scheme::Apr1),
            (APR1_UTF8, "pässwörd", Scheme::Apr1),
            (SHA256, "s3cret:with:colons", Scheme::ShaCrypt),
            (SHA256_OPENSSL, "x", Scheme::ShaCrypt),
            (SHA512, "pässwörd", Scheme::ShaCrypt),
            (SHA512_ROUNDS, "h", Scheme::ShaCrypt),
        ] {
            assert_eq!(Hash::parse(hash).unwrap().scheme(), scheme, "{hash}");
            assert!(verifies(hash, password), "{hash} with {password:?}");
        }
    }

    #[test]
    fn wrong_passwords() {
        for (hash, wrong) in [
            (BCRYPT_2Y, "correct horse "),
            (BCRYPT_2Y, ""),
            (BCRYPT_2Y_EMPTY, "x"),
            (BCRYPT_2A, "U*V"),
            (APR1, "Hunter2"),
            (APR1, ""),
            (SHA256, "s3cret"),
            (SHA512, "passwörd"),
            (SHA512_ROUNDS, "H"),
        ] {
            assert!(!verifies(hash, wrong), "{hash} with {wrong:?}");
        }
    }

    #[test]
    fn refused_kinds_say_why() {
        for (hash, why) in [
            ("{SHA}EfatjsUqKYSrqv18O1FlA3hcIHI=", "unsalted SHA-1"),
            ("ULEDhT7DP4xE2", "crypt(3) DES"),
            ("plain", "plaintext"),
            ("", "plaintext"),
            ("$1$abc$OGyl6dDvZCDiGmIVbeuCq/", "MD5-crypt"),
            (
                "$2x$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW",
                "$-hash",
            ),
            ("$argon2id$v=19$m=65536,t=2,p=1$c2FsdA$aGFzaA", "$-hash"),
        ] {
            let err = Hash::parse(hash).unwrap_err();
            assert!(err.contains(why), "{hash}: {err}");
            assert!(
                hash.len() < 8 || !err.contains(hash),
                "echoes the hash: {err}"
            );
        }
    }

    #[test]
    fn malformed_hashes_of_accepted_kinds() {
        let too_costly = BCRYPT_2Y.replacen("$04$", "$18$", 1);
        let too_cheap = BCRYPT_2Y.replacen("$04$", "$03$", 1);
        let many_rounds = SHA512_ROUNDS.replacen("rounds=1000", "rounds=1000001", 1);
        let few_rounds = SHA512_ROUNDS.replacen("rounds=1000", "rounds=999", 1);
        let huge_rounds = SHA512_ROUNDS.replacen("rounds=1000", "rounds=9999999999", 1);
        for (hash, why) in [
            (&BCRYPT_2Y[..59], "malformed bcrypt"),
            (&too_costly[..], "cost 18"),
            (&too_cheap[..], "cost 3"),
            (
                "$2y$4$NyCJjL9f28.T9MaSU4P/xuzh84p2ka/GPsteiJqQlV9a3HUuepmEix",
                "malformed bcrypt",
            ),
            (
                "$2y$04$NyCJjL9f28.T9MaSU4P/xuzh84p2ka/GPsteiJqQlV9a3HUuepmE\u{1}",
                "malformed bcrypt",
            ),
            (&many_rounds[..], "rounds=1000001"),
            (&few_rounds[..], "rounds=999"),
            (&huge_rounds[..], "rounds=9999999999"),
            ("$6$rounds=$abc$x", "malformed SHA-crypt"),
            (&SHA256[..SHA256.len() - 1], "malformed SHA-crypt"),
            (
                "$5$$r5SxrHEkqKPVj.xUHXz/LWgBqsotbBQb9aAyuLaJDh1",
                "malformed SHA-crypt",
            ),
            (
                "$5$a\u{7}b$r5SxrHEkqKPVj.xUHXz/LWgBqsotbBQb9aAyuLaJDh1",
                "malformed SHA-crypt",
            ),
            ("$apr1$WNU5/TRs$f.pwrh2Sr3wmOapxmfjiM", "malformed apr1"),
            ("$apr1$WNU5/TRsX$f.pwrh2Sr3wmOapxmfjiM/", "malformed apr1"),
            ("$apr1$\u{1}$f.pwrh2Sr3wmOapxmfjiM/", "malformed apr1"),
            ("$apr1$", "malformed apr1"),
        ] {
            let err = Hash::parse(hash).unwrap_err();
            assert!(err.contains(why), "{hash:?}: {err}");
        }
    }

    fn parse(text: &str) -> (Table, Vec<String>) {
        let mut messages = Vec::new();
        let table = Table::parse(text.as_bytes(), "pw", &mut |m| messages.push(m.to_string()));
        (table, messages)
    }

    #[test]
    fn lines_comments_blanks_and_refusals() {
        let text = format!(
            "# staff\n\n  alice:{BCRYPT_2Y}  \r\nbob:{APR1}:extra field\n\
             eve:{{SHA}}EfatjsUqKYSrqv18O1FlA3hcIHI=\nno colon here\n\
             frank:ULEDhT7DP4xE2\n:{APR1}\ncarol:{SHA512}"
        );
        let (table, messages) = parse(&text);
        assert_eq!(table.len(), 5, "alice, bob, eve, frank, carol");
        let hash = |user: &str| table.find(user.as_bytes()).map(|e| e.hash.is_some());
        assert_eq!(hash("alice"), Some(true));
        assert_eq!(hash("bob"), Some(true));
        assert_eq!(hash("carol"), Some(true));
        assert_eq!(hash("eve"), Some(false));
        assert_eq!(hash("frank"), Some(false));
        assert_eq!(hash("mallory"), None);
        assert_eq!(hash(""), None);
        assert!(table
            .find(b"alice")
            .unwrap()
            .hash
            .as_ref()
            .unwrap()
            .verify(b"correct horse"));
        let expected = [
            "pw:5: user \"eve\": an unsalted SHA-1",
            "pw:6: not a user:hash line",
            "pw:7: user \"frank\": a crypt(3) DES",
            "pw:8: a user name must have",
        ];
        assert_eq!(messages.len(), expected.len(), "{messages:?}");
        for (message, start) in messages.iter().zip(expected) {
            assert!(message.starts_with(start), "{messages:?}");
        }
        assert!(messages.iter().all(|m| !m.contains('\n')));
    }

    #[test]
    fn the_first_line_of_a_user_counts_even_when_refused() {
        let (table, messages) = parse(&format!("bob:plain\nbob:{APR1}\n"));
        assert_eq!(table.len(), 1);
        assert!(table.find(b"bob").unwrap().hash.is_none());
        assert!(
            messages[1].starts_with("pw:2: user \"bob\" again (first on line 1)"),
            "{messages:?}"
        );
    }

    #[test]
    fn decoy_is_the_first_usable_hash() {
        let (table, _) = parse(&format!("a:plain\nb:{APR1}\nc:{SHA512}\n"));
        assert_eq!(table.decoy().unwrap().scheme(), Scheme::Apr1);
        assert!(parse("a:plain\n").0.decoy().is_none());
    }

    #[test]
    fn bounded_in_users_bytes_and_messages() {
        let many: String = (0..MAX_USERS + 5)
            .map(|i| format!("u{i}:{APR1}\n"))
            .collect();
        let (table, messages) = parse(&many);
        assert_eq!(table.len(), MAX_USERS);
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert!(
            messages[0].contains("more than 10000 users"),
            "{messages:?}"
        );

        let mut big = format!("first:{APR1}\n").into_bytes();
        big.resize(MAX_FILE_BYTES - 10, b'#');
        big.extend_from_slice(format!("\nlast:{APR1}\n").as_bytes());
        let mut messages = Vec::new();
        let table = Table::parse(&big, "pw", &mut |m| messages.push(m.to_string()));
        assert!(table.find(b"first").is_some());
        assert!(table.find(b"last").is_none(), "past 1 MiB");
        assert_eq!(messages.len(), 1);
        assert!(messages[0].contains("larger than 1024 KiB"), "{messages:?}");

        let bad: String = (0..50).map(|i| format!("u{i}:plain\n")).collect();
        let (table, messages) = parse(&bad);
        assert_eq!(table.len(), 50);
        assert_eq!(messages.len(), MAX_REPORTED + 1);
        assert!(
            messages[MAX_REPORTED].contains("30 more lines"),
            "{messages:?}"
        );
    }

    #[test]
    fn odd_bytes_never_panic() {
        let (table, messages) = parse("\u{0}:\u{0}\n\u{ff}\n");
        assert!(table.is_empty());
        assert_eq!(messages.len(), 2, "{messages:?}");
        let mut messages = Vec::new();
        let table = Table::parse(b"a\xff:$apr1$x\n", "pw", &mut |m| {
            messages.push(m.to_string())
        });
        assert!(table.is_empty());
        assert!(messages[0].contains("not UTF-8"), "{messages:?}");
    }
}
