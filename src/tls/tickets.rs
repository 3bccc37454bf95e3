//! Session tickets sealed with keys from files (`--tls-ticket-key`), so that
//! a ticket one process issued resumes on another: inetd-mode processes,
//! restarts, several machines behind one load balancer.
//!
//! A key file is 48 or 80 random bytes, the sizes nginx's
//! `ssl_session_ticket_key` takes (`openssl rand 80 > ticket.key`), so one
//! file can be handed to both. Its bytes are stretched with HKDF-SHA256 into
//! a 16-byte key name and an AES-256-GCM key. The first file seals new
//! tickets; every file opens them, which is how keys are rotated: put the
//! new file first and keep the old one listed until its tickets expire.

use std::path::{Path, PathBuf};

use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use aws_lc_rs::hkdf;
use rustls::server::ProducesTickets;

use crate::sys::describe;

/// How long a ticket resumes, in seconds: rustls's own ticketer's 12 hours.
const LIFETIME: u32 = 12 * 60 * 60;
const NAME_LEN: usize = 16;

pub struct FileTicketer {
    /// The first key seals; all of them open.
    keys: Vec<TicketKey>,
}

struct TicketKey {
    name: [u8; NAME_LEN],
    aead: LessSafeKey,
}

impl std::fmt::Debug for FileTicketer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key bytes.
        write!(f, "FileTicketer({} keys)", self.keys.len())
    }
}

impl FileTicketer {
    pub fn load(paths: &[PathBuf]) -> Result<FileTicketer, String> {
        let keys = paths
            .iter()
            .map(|p| load_key(p))
            .collect::<Result<_, _>>()?;
        Ok(FileTicketer { keys })
    }
}

fn load_key(path: &Path) -> Result<TicketKey, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {}", path.display(), describe(&e)))?;
    if bytes.len() != 48 && bytes.len() != 80 {
        return Err(format!(
            "{}: a ticket key file holds 48 or 80 random bytes (openssl rand 80 > FILE), not {}",
            path.display(),
            bytes.len()
        ));
    }
    Ok(TicketKey::derive(&bytes))
}

/// HKDF's output length for a byte array.
struct Len(usize);

impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

impl TicketKey {
    fn derive(secret: &[u8]) -> TicketKey {
        let prk = hkdf::Salt::new(hkdf::HKDF_SHA256, b"staticd session tickets").extract(secret);
        let mut name = [0u8; NAME_LEN];
        let mut key = [0u8; 32];
        // Both lengths are far below HKDF-SHA256's limit: these cannot fail.
        let expand = |info: &[u8], out: &mut [u8]| {
            let info = [info];
            let okm = prk
                .expand(&info, Len(out.len()))
                .expect("short HKDF output");
            okm.fill(out).expect("short HKDF output");
        };
        expand(b"key name", &mut name);
        expand(b"aes-256-gcm key", &mut key);
        let aead = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &key).expect("32-byte key"));
        TicketKey { name, aead }
    }
}

/// A ticket: key name, nonce, then the sealed state and its tag.
impl ProducesTickets for FileTicketer {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        LIFETIME
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let key = self.keys.first()?;
        let mut nonce = [0u8; NONCE_LEN];
        aws_lc_rs::rand::fill(&mut nonce).ok()?;
        let mut ticket = Vec::with_capacity(NAME_LEN + NONCE_LEN + plain.len() + 16);
        ticket.extend_from_slice(&key.name);
        ticket.extend_from_slice(&nonce);
        let mut sealed = plain.to_vec();
        key.aead
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(&key.name),
                &mut sealed,
            )
            .ok()?;
        ticket.extend_from_slice(&sealed);
        Some(ticket)
    }

    fn decrypt(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        let (name, rest) = ticket.split_at_checked(NAME_LEN)?;
        let (nonce, sealed) = rest.split_at_checked(NONCE_LEN)?;
        let key = self.keys.iter().find(|k| k.name == name)?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        let mut buf = sealed.to_vec();
        let plain_len = key
            .aead
            .open_in_place(nonce, Aad::from(&key.name), &mut buf)
            .ok()?
            .len();
        buf.truncate(plain_len);
        Some(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticketer(secrets: &[&[u8]]) -> FileTicketer {
        FileTicketer {
            keys: secrets.iter().map(|s| TicketKey::derive(s)).collect(),
        }
    }

    #[test]
    fn sealed_by_one_opened_by_another_with_the_same_file() {
        let a = ticketer(&[&[7; 80]]);
        let b = ticketer(&[&[7; 80]]);
        let ticket = a.encrypt(b"session state").unwrap();
        assert_eq!(b.decrypt(&ticket).unwrap(), b"session state");
        assert!(ticketer(&[&[8; 80]]).decrypt(&ticket).is_none());
    }

    #[test]
    fn rotation_and_tampering() {
        let old = ticketer(&[&[1; 48]]);
        let rotated = ticketer(&[&[2; 48], &[1; 48]]);
        let ticket = old.encrypt(b"x").unwrap();
        assert_eq!(rotated.decrypt(&ticket).unwrap(), b"x");
        let mut bent = ticket.clone();
        *bent.last_mut().unwrap() ^= 1;
        assert!(rotated.decrypt(&bent).is_none());
        assert!(rotated.decrypt(&ticket[..20]).is_none());
        assert!(rotated.decrypt(&[]).is_none());
    }
}
