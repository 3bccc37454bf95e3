//! Automatic HTTPS: certificates from an ACME CA (RFC 8555), obtained and
//! renewed by a thread of its own while the server serves.
//!
//! - [`names`]: which names (`--acme`, `--acme-vhosts`).
//! - `state`: the state directory: account, certificates in `--tls-dir`'s
//!   layout, the lock that keeps processes sharing it from ordering twice,
//!   and the challenge answers any of those processes can give.
//! - `schedule`: when to renew and when to retry (arithmetic only).
//! - `client`: the HTTP client that trusts `--acme-ca` and notes
//!   Retry-After.
//! - `order`: one order, from new-order to the certificate chain.
//! - `manager`: the thread's loop over the names.
//! - [`Issued`] (here): what the TLS resolver and the `--redirect-http`
//!   listener ask while serving.

mod client;
mod manager;
pub mod names;
mod order;
mod schedule;
mod state;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

use rustls::sign::CertifiedKey;

use crate::config::{Acme, Challenge};
use crate::tls::Managed;
pub use state::Answers;

/// The certificates ACME serves, by name, and the challenge answers being
/// validated. Shared by the manager thread (which writes) and every TLS
/// handshake (which reads).
#[derive(Debug)]
pub struct Issued {
    /// The names being managed: only these get challenge certificates.
    names: RwLock<Vec<String>>,
    served: RwLock<HashMap<String, Arc<CertifiedKey>>>,
    answers: Answers,
}

impl Issued {
    /// Nothing issued yet; `dir` is `--acme-dir`, where answers appear.
    pub fn new(dir: &Path) -> Issued {
        Issued {
            names: RwLock::new(Vec::new()),
            served: RwLock::new(HashMap::new()),
            answers: Answers::new(dir),
        }
    }

    /// What the `--redirect-http` listener answers HTTP-01 from.
    pub fn answers(&self) -> &Answers {
        &self.answers
    }

    fn set_names(&self, names: &[String]) {
        *self.names.write().unwrap_or_else(|p| p.into_inner()) = names.to_vec();
    }

    /// Serves `key` for `name` to new handshakes from now on; connections
    /// in flight keep what they negotiated.
    fn install(&self, name: &str, key: Arc<CertifiedKey>) {
        let mut served = self.served.write().unwrap_or_else(|p| p.into_inner());
        served.insert(name.to_string(), key);
    }
}

impl Managed for Issued {
    fn certificate(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        let served = self.served.read().unwrap_or_else(|p| p.into_inner());
        served.get(name).cloned()
    }

    fn challenge(&self, name: &str) -> Option<Arc<CertifiedKey>> {
        // Only managed names are looked up: they are checked DNS names,
        // safe as file names; the SNI of a stranger is not.
        let managed = self.names.read().unwrap_or_else(|p| p.into_inner());
        if !managed.iter().any(|n| n == name) {
            return None;
        }
        drop(managed);
        let pem = self.answers.tls_alpn01(name)?;
        crate::tls::challenge_from_pem(&pem).ok().map(Arc::new)
    }
}

/// Where the server listens, as far as challenges care.
pub struct Listeners {
    /// `--redirect-http` is open: HTTP-01 can be answered.
    pub http01: bool,
}

/// Opens the state directory, serves the certificates it already holds,
/// and starts the thread that obtains and renews the rest. Called after
/// privileges are dropped, so that the state is written by the user the
/// server runs as. `root` is the document root, for `--acme-vhosts`.
/// Errors are one line naming the flag.
pub fn start(
    settings: &Acme,
    vhosts_root: Option<&Path>,
    issued: &Arc<Issued>,
    listeners: Listeners,
) -> Result<(), String> {
    let kinds: Vec<Challenge> = settings
        .challenges
        .iter()
        .copied()
        .filter(|k| *k != Challenge::Http01 || listeners.http01)
        .collect();
    if kinds.is_empty() {
        return Err(
            "--acme-challenge http-01 needs --redirect-http PORT: the CA validates on port 80"
                .to_string(),
        );
    }
    let state = state::StateDir::open(&settings.dir)?;
    let clients = client::Clients::new(settings.ca.as_deref())?;
    let manager = manager::Manager::new(
        settings.clone(),
        kinds,
        vhosts_root.map(Path::to_path_buf),
        state,
        clients,
        Arc::clone(issued),
    );
    manager.spawn()
}
