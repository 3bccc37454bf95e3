//! The ACME thread: for each name, serve what the state directory holds,
//! order a certificate when none is there or renewal is due, retry with
//! backoff when the CA refuses, and pick up what another process sharing
//! the directory ordered. One line in the log per event.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::tls::Loaded;
use instant_acme::{Account, AccountCredentials, CertificateIdentifier, NewAccount};

use super::client::Clients;
use super::order::{self, Failed};
use super::schedule;
use super::state::{write_atomically, StateDir};
use super::{names, Issued};
use crate::config::{Acme, Challenge};
use crate::sys::describe;

/// How often the state directory is looked at for certificates another
/// process renewed, and `--acme-vhosts` for new sites.
const POLL: Duration = Duration::from_secs(5);
/// A rate-limited order without a Retry-After waits at least this long.
const RATE_LIMITED: Duration = Duration::from_secs(60 * 60);
/// How often the CA's renewal information is asked for at most and least.
const ARI_MIN: Duration = Duration::from_secs(60);
const ARI_MAX: Duration = Duration::from_secs(24 * 60 * 60);

pub struct Manager {
    settings: Acme,
    /// The challenge kinds the listeners can answer, in preference order.
    kinds: Vec<Challenge>,
    vhosts_root: Option<PathBuf>,
    state: StateDir,
    clients: Clients,
    issued: Arc<Issued>,
    account: Option<Account>,
    /// Whether the CA offers renewal information (RFC 9773); None until
    /// asked. Orders name the certificate they replace only when it does.
    ari: Option<bool>,
    slots: Vec<Slot>,
    /// Said once that another process holds the lock.
    told_waiting: bool,
}

/// One name's certificate and schedule.
struct Slot {
    name: String,
    /// The served version in the state directory, to notice a new one.
    version: Option<(PathBuf, SystemTime)>,
    served: Option<Served>,
    /// When the next order is due: at once without a certificate.
    due: SystemTime,
    /// Failed attempts since the last success.
    failures: u32,
    /// After a failure: not before this.
    retry_at: Option<SystemTime>,
    /// When to ask the CA's renewal information next.
    ari_at: Option<SystemTime>,
    /// Which of the kinds to try first: the next one after a failure.
    first_kind: usize,
    /// The last order with `replaces` failed: order without it.
    skip_replaces: bool,
}

/// What is known of a served certificate.
struct Served {
    not_before: SystemTime,
    not_after: SystemTime,
    id: Option<CertificateIdentifier<'static>>,
}

impl Served {
    /// What the schedule needs of a loaded certificate; None when its
    /// validity cannot be read.
    fn of(loaded: &Loaded) -> Option<Served> {
        Some(Served {
            not_before: loaded.not_before?,
            not_after: loaded.not_after?,
            id: CertificateIdentifier::try_from(&loaded.key.cert[0])
                .ok()
                .map(CertificateIdentifier::into_owned),
        })
    }
}

impl Slot {
    fn new(name: String) -> Slot {
        Slot {
            name,
            version: None,
            served: None,
            due: SystemTime::UNIX_EPOCH,
            failures: 0,
            retry_at: None,
            ari_at: None,
            first_kind: 0,
            skip_replaces: false,
        }
    }

    /// When the next order may start.
    fn next_attempt(&self) -> SystemTime {
        self.retry_at.map_or(self.due, |at| at.max(self.due))
    }
}

impl Manager {
    pub fn new(
        settings: Acme,
        kinds: Vec<Challenge>,
        vhosts_root: Option<PathBuf>,
        state: StateDir,
        clients: Clients,
        issued: Arc<Issued>,
    ) -> Manager {
        let mut manager = Manager {
            settings,
            kinds,
            vhosts_root,
            state,
            clients,
            issued,
            account: None,
            ari: None,
            slots: Vec::new(),
            told_waiting: false,
        };
        manager.update_names();
        // Before the first handshake: what the directory holds is served
        // from the start.
        for i in 0..manager.slots.len() {
            manager.pick_up(i);
        }
        manager
    }

    /// Runs the loop on a thread of its own, with a tokio runtime of its
    /// own: the transports are never slowed by a CA.
    pub fn spawn(self) -> Result<(), String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("acme: {}", describe(&e)))?;
        std::thread::Builder::new()
            .name("acme".to_string())
            .spawn(move || runtime.block_on(self.run()))
            .map_err(|e| format!("acme: {}", describe(&e)))?;
        Ok(())
    }

    async fn run(mut self) {
        loop {
            self.update_names();
            for i in 0..self.slots.len() {
                self.pick_up(i);
            }
            self.ask_renewal_info().await;
            for i in 0..self.slots.len() {
                if self.slots[i].next_attempt() <= SystemTime::now() {
                    self.attempt(i).await;
                }
            }
            let wake = self
                .slots
                .iter()
                .flat_map(|s| [Some(s.next_attempt()), s.ari_at])
                .flatten()
                .min();
            let now = SystemTime::now();
            let wait = wake.map_or(POLL, |at| at.duration_since(now).unwrap_or(Duration::ZERO));
            tokio::time::sleep(wait.clamp(Duration::from_millis(50), POLL)).await;
        }
    }

    /// The names from `--acme`, and from `--acme-vhosts` as the
    /// directories are now; a new one gets a slot (and an order).
    fn update_names(&mut self) {
        let mut wanted = self.settings.names.clone();
        if let Some(root) = &self.vhosts_root {
            wanted.extend(names::from_vhosts(root));
        }
        wanted.sort();
        wanted.dedup();
        for name in &wanted {
            if !self.slots.iter().any(|s| &s.name == name) {
                self.slots.push(Slot::new(name.clone()));
            }
        }
        self.issued.set_names(&wanted);
    }

    /// Serves the certificate in the state directory if it is new to this
    /// process: at start, after this process ordered one, and when another
    /// process sharing the directory did.
    fn pick_up(&mut self, i: usize) {
        let name = self.slots[i].name.clone();
        let live = self.state.live(&name);
        let version = current_version(&live);
        if version.is_none() || version == self.slots[i].version {
            return;
        }
        self.slots[i].version = version;
        match load(&live) {
            Ok(loaded) => self.serve(i, loaded, &format!("certificate from {}", live.display())),
            Err(failed) => say(&name, format_args!("{}: {}", live.display(), failed.why)),
        }
    }

    /// Serves `loaded` for slot `i` from now on, schedules its renewal,
    /// and says so in a line that begins with `what`.
    fn serve(&mut self, i: usize, loaded: Loaded, what: &str) {
        let slot = &mut self.slots[i];
        let Some(served) = Served::of(&loaded) else {
            say(
                &slot.name,
                format_args!("{what}: the certificate has no readable validity"),
            );
            return;
        };
        let key = loaded.key;
        slot.due = schedule::renewal_due(served.not_before, served.not_after);
        if !loaded
            .names
            .iter()
            .any(|n| n.eq_ignore_ascii_case(&slot.name))
        {
            // Not for this name (copied in by hand): order one.
            slot.due = SystemTime::now();
        }
        slot.failures = 0;
        slot.retry_at = None;
        slot.ari_at = (self.ari != Some(false)).then(SystemTime::now);
        // Served before it is announced: whoever reads the line gets it.
        self.issued.install(&slot.name, key);
        say(
            &slot.name,
            format_args!(
                "{what}, valid until {}; renewal due {}",
                date(served.not_after),
                date(slot.due)
            ),
        );
        slot.served = Some(served);
    }

    /// RFC 9773: the CA may ask for an earlier (or later) renewal than two
    /// thirds of the lifetime, e.g. before a mass revocation.
    async fn ask_renewal_info(&mut self) {
        if self.ari == Some(false) || !self.slots.iter().any(|s| s.ari_at.is_some()) {
            return;
        }
        let now = SystemTime::now();
        for i in 0..self.slots.len() {
            let due = self.slots[i].ari_at.is_some_and(|at| at <= now);
            let id = self.slots[i].served.as_ref().and_then(|s| s.id.clone());
            let (true, Some(id)) = (due, id) else {
                continue;
            };
            // Only with an account already made: asking is no reason to
            // create one.
            let Ok(account) = self.account(false).await else {
                self.slots[i].ari_at = Some(now + ARI_MAX);
                continue;
            };
            match account.renewal_info(&id).await {
                Ok((info, recheck)) => {
                    self.ari = Some(true);
                    let window = &info.suggested_window;
                    let (start, end) =
                        (SystemTime::from(window.start), SystemTime::from(window.end));
                    let slot = &mut self.slots[i];
                    if !(start..=end).contains(&slot.due) {
                        slot.due = schedule::in_window(start, end, schedule::random_fraction());
                        say(
                            &slot.name,
                            format_args!("the CA's renewal window: renewal due {}", date(slot.due)),
                        );
                    }
                    slot.ari_at = Some(now + recheck.clamp(ARI_MIN, ARI_MAX));
                }
                Err(instant_acme::Error::Unsupported(_)) => {
                    self.ari = Some(false);
                    self.slots.iter_mut().for_each(|s| s.ari_at = None);
                    return;
                }
                Err(_) => self.slots[i].ari_at = Some(now + ARI_MAX / 24),
            }
        }
    }

    /// One order for slot `i`, if this process holds the lock.
    async fn attempt(&mut self, i: usize) {
        let lock = match self.state.try_lock() {
            Ok(Some(lock)) => lock,
            Ok(None) => {
                if !self.told_waiting {
                    self.told_waiting = true;
                    eprintln!(
                        "staticd: acme: another staticd holds {}: waiting for its certificates",
                        self.state.path().join("lock").display()
                    );
                }
                self.slots[i].retry_at = Some(SystemTime::now() + POLL);
                return;
            }
            Err(e) => {
                let why = format!(
                    "{}: {}",
                    self.state.path().join("lock").display(),
                    describe(&e)
                );
                self.failed(i, Failed::from(why));
                return;
            }
        };
        // The holder before may have just stored a new certificate.
        self.pick_up(i);
        if self.slots[i].next_attempt() > SystemTime::now() {
            return;
        }
        let slot = &self.slots[i];
        let name = slot.name.clone();
        let mut kinds = self.kinds.clone();
        let first = slot.first_kind % kinds.len();
        kinds.rotate_left(first);
        let replaces = match (&slot.served, slot.skip_replaces, self.ari) {
            (Some(served), false, Some(true)) => served.id.clone(),
            _ => None,
        };
        say(
            &name,
            format_args!(
                "ordering a certificate (attempt {}, {})",
                slot.failures + 1,
                kinds[0].as_str()
            ),
        );
        let result = match self.account(true).await {
            Ok(account) => {
                let had_replaces = replaces.is_some();
                let result = order::obtain(&account, &name, &kinds, &self.state, replaces).await;
                self.slots[i].skip_replaces = had_replaces && result.is_err();
                result
            }
            Err(failed) => Err(failed),
        };
        match result.and_then(|obtained| self.store(i, obtained)) {
            Ok(()) => {}
            Err(failed) => self.failed(i, failed),
        }
        drop(lock);
    }

    /// Keeps and serves a new certificate.
    fn store(&mut self, i: usize, obtained: order::Obtained) -> Result<(), Failed> {
        let name = self.slots[i].name.clone();
        // Checked before it is stored: a chain that does not load is
        // never left for the next start (or another process) to serve.
        let loaded =
            crate::tls::loaded_from_pem(obtained.chain_pem.as_bytes(), obtained.key_pem.as_bytes())
                .map_err(|why| format!("the CA's certificate: {why}"))?;
        if Served::of(&loaded).is_none() {
            return Err("the CA's certificate has no readable validity".into());
        }
        let live = self.state.live(&name);
        self.state
            .store(&name, &obtained.chain_pem, &obtained.key_pem)
            .map_err(|e| format!("{}: {}", live.display(), describe(&e)))?;
        self.slots[i].version = current_version(&live);
        let how = obtained
            .challenge
            .map_or("authorization reused", Challenge::as_str);
        self.serve(i, loaded, &format!("certificate issued ({how})"));
        Ok(())
    }

    /// Schedules the retry: the backoff, or the CA's Retry-After when later.
    fn failed(&mut self, i: usize, failed: Failed) {
        let problem = failed.problem.as_deref().unwrap_or("");
        if problem.ends_with(":accountDoesNotExist") {
            // The CA forgot the account (a test CA restarted, an account
            // deactivated): make a new one next time.
            if self.account.take().is_some() {
                let _ = std::fs::remove_file(self.state.account_file(&self.settings.directory));
            }
        }
        let now = SystemTime::now();
        let slot = &mut self.slots[i];
        slot.failures += 1;
        slot.first_kind += 1;
        let mut delay = schedule::retry_delay(
            self.settings.backoff,
            slot.failures,
            schedule::random_fraction(),
        );
        if problem.ends_with(":rateLimited") {
            delay = delay.max(RATE_LIMITED);
        }
        if let Some(at) = self.clients.take_retry_after() {
            delay = delay.max(at.duration_since(now).unwrap_or(Duration::ZERO));
        }
        slot.retry_at = Some(now + delay);
        say(
            &slot.name,
            format_args!(
                "attempt {} failed: {}; next attempt in {}s",
                slot.failures,
                failed.why,
                delay.as_secs_f64().round() as u64
            ),
        );
    }

    /// The account at the CA: loaded from the state directory, else (with
    /// `create`) registered, agreeing to the CA's terms of service.
    async fn account(&mut self, create: bool) -> Result<Account, Failed> {
        if let Some(account) = &self.account {
            return Ok(account.clone());
        }
        let directory = self.settings.directory.clone();
        let file = self.state.account_file(&directory);
        let client = self.clients.client()?;
        let account = match std::fs::read(&file) {
            Ok(bytes) => {
                let credentials: AccountCredentials = serde_json::from_slice(&bytes)
                    .map_err(|e| format!("{}: {e}", file.display()))?;
                Account::builder_with_http(client)
                    .from_credentials(credentials)
                    .await?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => {
                let contact: Vec<String> = self
                    .settings
                    .email
                    .iter()
                    .map(|e| format!("mailto:{e}"))
                    .collect();
                let contact: Vec<&str> = contact.iter().map(String::as_str).collect();
                let new = NewAccount {
                    contact: &contact,
                    terms_of_service_agreed: true,
                    only_return_existing: false,
                };
                let (account, credentials) = Account::builder_with_http(client)
                    .create(&new, directory.clone(), None)
                    .await?;
                let json = serde_json::to_vec_pretty(&credentials)
                    .map_err(|e| format!("account credentials: {e}"))?;
                write_atomically(&file, &json, 0o600)
                    .map_err(|e| format!("{}: {}", file.display(), describe(&e)))?;
                eprintln!(
                    "staticd: acme: account {} at {directory} (kept in {})",
                    account.id(),
                    file.display()
                );
                account
            }
            Err(e) => return Err(format!("{}: {}", file.display(), describe(&e)).into()),
        };
        self.account = Some(account.clone());
        Ok(account)
    }
}

/// The served version of `live`: where its symlink points and when its
/// chain was written (a directory copied in by hand has no link).
fn current_version(live: &std::path::Path) -> Option<(PathBuf, SystemTime)> {
    let written = std::fs::metadata(live.join("fullchain.pem"))
        .and_then(|m| m.modified())
        .ok()?;
    let target = std::fs::read_link(live).unwrap_or_else(|_| live.to_path_buf());
    Some((target, written))
}

/// Reads the certificate and key in `dir`.
fn load(dir: &std::path::Path) -> Result<Loaded, Failed> {
    Ok(crate::tls::load_files(
        &dir.join("fullchain.pem"),
        &dir.join("privkey.pem"),
    )?)
}

fn date(t: SystemTime) -> String {
    httpdate::fmt_http_date(t)
}

/// One log line about `name`.
fn say(name: &str, what: std::fmt::Arguments<'_>) {
    eprintln!("staticd: acme: {name}: {what}");
}
