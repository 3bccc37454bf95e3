//! The state directory (`--acme-dir`): what ACME keeps between runs and
//! shares between the processes that use the same directory.
//!
//! ```text
//! DIR/account-<CA>.json         account credentials, one per CA directory URL (0600)
//! DIR/lock                      flock(2): one process at a time orders certificates
//! DIR/<name> -> .<name>.<secs>  the served version: fullchain.pem, privkey.pem (0600)
//! DIR/.challenges/http-01/<token>       key authorizations being validated
//! DIR/.challenges/tls-alpn-01/<name>    challenge certificates being validated
//! ```
//!
//! `DIR/<name>` is a symlink swapped by rename(2), so a reader (this
//! process, another staticd with `--tls-dir DIR`) sees the old pair or the
//! new one, never a new certificate with an old key. Hidden entries are
//! what `--tls-dir` skips.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::sys::describe;

const CHALLENGES: &str = ".challenges";
const HTTP_01: &str = "http-01";
const TLS_ALPN_01: &str = "tls-alpn-01";
/// A key authorization is a token, a dot and a thumbprint: well under this.
const MAX_ANSWER: u64 = 1024;
/// A challenge certificate and its key in PEM.
const MAX_CHALLENGE_CERT: u64 = 16 * 1024;

/// An opened, writable state directory.
#[derive(Clone, Debug)]
pub struct StateDir {
    dir: PathBuf,
}

impl StateDir {
    /// Creates the directory (0700) if it is missing and checks that this
    /// process can write there. The error is one line naming the flag.
    pub fn open(dir: &Path) -> Result<StateDir, String> {
        let fail = |e: io::Error| format!("--acme-dir {}: {}", dir.display(), describe(&e));
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(fail)?;
        let state = StateDir {
            dir: dir.to_path_buf(),
        };
        for kind in [HTTP_01, TLS_ALPN_01] {
            let sub = state.challenges().join(kind);
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&sub)
                .map_err(fail)?;
        }
        // Creating a directory that exists proves nothing: write a file.
        let probe = dir.join(".write-test");
        write_atomically(&probe, b"", 0o600).map_err(fail)?;
        let _ = fs::remove_file(&probe);
        Ok(state)
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn challenges(&self) -> PathBuf {
        self.dir.join(CHALLENGES)
    }

    /// The account file for the CA at `directory_url`: one per CA, so that
    /// trying the staging CA does not lose the production account.
    pub fn account_file(&self, directory_url: &str) -> PathBuf {
        let readable: String = directory_url
            .trim_start_matches("https://")
            .chars()
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '-' => c,
                _ => '_',
            })
            .collect();
        self.dir.join(format!("account-{readable}.json"))
    }

    /// Takes the lock without waiting: None while another process holds it.
    pub fn try_lock(&self) -> io::Result<Option<Lock>> {
        use rustix::fs::{flock, FlockOperation};
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(self.dir.join("lock"))?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(Lock { _file: file })),
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Where `name`'s served certificate is.
    pub fn live(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Stores a new certificate and key for `name` and makes it the served
    /// version in one rename; keeps the version before it, removes older.
    pub fn store(&self, name: &str, chain_pem: &str, key_pem: &str) -> io::Result<()> {
        let secs = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut version = format!(".{name}.{secs}");
        let mut n = 1;
        while self.dir.join(&version).exists() {
            version = format!(".{name}.{secs}-{n}");
            n += 1;
        }
        let version_dir = self.dir.join(&version);
        DirBuilder::new().mode(0o700).create(&version_dir)?;
        write_atomically(&version_dir.join("privkey.pem"), key_pem.as_bytes(), 0o600)?;
        write_atomically(
            &version_dir.join("fullchain.pem"),
            chain_pem.as_bytes(),
            0o644,
        )?;
        let live = self.live(name);
        let link = self.dir.join(format!(".{name}.link"));
        let _ = fs::remove_file(&link);
        std::os::unix::fs::symlink(&version, &link)?;
        // A real directory in the way (certificates copied in by hand) is
        // kept aside rather than replaced.
        if fs::symlink_metadata(&live).is_ok_and(|m| m.is_dir()) {
            fs::rename(&live, self.dir.join(format!(".{name}.{secs}.manual")))?;
        }
        fs::rename(&link, &live)?;
        self.prune(name, &version);
        Ok(())
    }

    /// Removes versions of `name` but the current one and the one before.
    fn prune(&self, name: &str, current: &str) {
        let prefix = format!(".{name}.");
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        let mut versions: Vec<(SystemTime, PathBuf)> = entries
            .filter_map(Result::ok)
            .filter(|e| {
                let file = e.file_name();
                let file = file.to_string_lossy();
                file.strip_prefix(&prefix)
                    .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
                    && !file.ends_with(".manual")
                    && file != current
            })
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .collect();
        versions.sort();
        versions.pop();
        for (_, old) in versions {
            let _ = fs::remove_dir_all(old);
        }
    }

    /// Publishes the answer to an HTTP-01 challenge, for every process that
    /// serves this directory's `--redirect-http` port.
    pub fn put_http01(&self, token: &str, key_authorization: &str) -> io::Result<Answer> {
        let path = self.challenges().join(HTTP_01).join(checked_token(token)?);
        write_atomically(&path, key_authorization.as_bytes(), 0o600)?;
        Ok(Answer(path))
    }

    /// Publishes a TLS-ALPN-01 challenge certificate and key (PEM).
    pub fn put_tls_alpn01(&self, name: &str, pem: &str) -> io::Result<Answer> {
        let path = self.challenges().join(TLS_ALPN_01).join(name);
        write_atomically(&path, pem.as_bytes(), 0o600)?;
        Ok(Answer(path))
    }
}

/// The lock of a state directory, released on drop (the descriptor closes).
pub struct Lock {
    _file: File,
}

/// A published challenge answer, withdrawn on drop.
pub struct Answer(PathBuf);

impl Drop for Answer {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Reads published challenge answers: what the listeners ask while a CA
/// validates. Holds only the path, so the transports can share it.
#[derive(Clone, Debug)]
pub struct Answers {
    challenges: PathBuf,
}

impl Answers {
    pub fn new(dir: &Path) -> Answers {
        Answers {
            challenges: dir.join(CHALLENGES),
        }
    }

    /// The key authorization for `token`, if a validation of it is under
    /// way. Tokens are base64url (RFC 8555 8.1): nothing else is looked up.
    pub fn http01(&self, token: &str) -> Option<Vec<u8>> {
        let token = checked_token(token).ok()?;
        read_bounded(&self.challenges.join(HTTP_01).join(token), MAX_ANSWER)
    }

    /// The challenge certificate and key (PEM) for `name`, one of the
    /// managed names (the caller checks), while a validation is under way.
    pub fn tls_alpn01(&self, name: &str) -> Option<Vec<u8>> {
        read_bounded(
            &self.challenges.join(TLS_ALPN_01).join(name),
            MAX_CHALLENGE_CERT,
        )
    }
}

impl crate::site::Http01 for Answers {
    fn answer(&self, token: &str) -> Option<Vec<u8>> {
        self.http01(token)
    }
}

fn checked_token(token: &str) -> io::Result<&str> {
    let fits = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    if token.is_empty() || token.len() > 256 || !token.bytes().all(fits) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not an ACME token",
        ));
    }
    Ok(token)
}

fn read_bounded(path: &Path, limit: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    File::open(path)
        .ok()?
        .take(limit)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(bytes)
}

/// Writes `bytes` to a temporary file beside `path` with `mode`, then
/// renames it over `path`: readers see the old file or the whole new one.
pub fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let _ = fs::remove_file(&tmp);
    let mut file = OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(mode)
        .open(&tmp)?;
    // The mode given to open(2) is cut by the umask: set it exactly.
    file.set_permissions(fs::Permissions::from_mode(mode))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "staticd-acme-state-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn versions_swap_whole_and_old_ones_go() {
        let dir = temp();
        let state = StateDir::open(&dir).unwrap();
        assert_eq!(
            fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        for i in 0..4 {
            state
                .store("a.example", &format!("chain {i}"), &format!("key {i}"))
                .unwrap();
            let live = state.live("a.example");
            assert_eq!(
                fs::read_to_string(live.join("fullchain.pem")).unwrap(),
                format!("chain {i}")
            );
            assert_eq!(
                fs::read_to_string(live.join("privkey.pem")).unwrap(),
                format!("key {i}")
            );
            let mode = fs::metadata(live.join("privkey.pem"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let versions = fs::read_dir(&dir)
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with(".a.example."))
            .count();
        assert_eq!(versions, 2, "the current version and the one before");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn answers_are_found_while_published_and_tokens_are_checked() {
        let dir = temp();
        let state = StateDir::open(&dir).unwrap();
        let answers = Answers::new(&dir);
        let answer = state.put_http01("tok-EN_1", "tok-EN_1.thumb").unwrap();
        assert_eq!(answers.http01("tok-EN_1").unwrap(), b"tok-EN_1.thumb");
        assert!(answers.http01("../lock").is_none());
        assert!(answers.http01("").is_none());
        assert!(state.put_http01("a/b", "x").is_err());
        drop(answer);
        assert!(answers.http01("tok-EN_1").is_none());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn one_lock_holder_at_a_time() {
        let dir = temp();
        let state = StateDir::open(&dir).unwrap();
        let held = state.try_lock().unwrap();
        assert!(held.is_some());
        // flock locks belong to the open file description: a second open
        // conflicts, as another process's would.
        assert!(state.try_lock().unwrap().is_none());
        drop(held);
        assert!(state.try_lock().unwrap().is_some());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn account_files_differ_by_ca() {
        let state = StateDir {
            dir: PathBuf::from("/d"),
        };
        assert_eq!(
            state.account_file("https://acme-v02.api.letsencrypt.org/directory"),
            Path::new("/d/account-acme-v02.api.letsencrypt.org_directory.json")
        );
        assert_ne!(
            state.account_file(crate::config::LETS_ENCRYPT_STAGING),
            state.account_file(crate::config::LETS_ENCRYPT)
        );
    }
}
