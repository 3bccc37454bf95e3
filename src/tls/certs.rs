//! Certificates and keys from PEM files, and the choice among them by SNI.
//!
//! Everything is loaded into a [`Store`] in one go, so a reload swaps a
//! whole new set in or keeps the old one: a half-read directory is never served.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::config::Https;
use crate::sys::describe;

/// One loaded set of certificates.
#[derive(Debug, Default)]
pub struct Store {
    /// By DNS name from the certificates' subjectAltNames, lower case.
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// `*.example.org` certificates, by `example.org`.
    wildcard: HashMap<String, Arc<CertifiedKey>>,
    fallback: Option<Arc<CertifiedKey>>,
}

/// A certificate file and what was found in it, for warnings (and for
/// ACME's renewal schedule).
pub struct Loaded {
    pub key: Arc<CertifiedKey>,
    pub names: Vec<String>,
    pub not_before: Option<SystemTime>,
    pub not_after: Option<SystemTime>,
}

impl Store {
    /// Loads every certificate `sources` names. The error is one line that
    /// names the file and the problem. `warn` hears of expired certificates
    /// (which still load: a server that refused to start would serve nothing).
    pub fn load(
        sources: &Https,
        provider: &CryptoProvider,
        warn: &mut dyn FnMut(String),
    ) -> Result<Store, String> {
        let mut store = Store::default();
        let mut check = |path: &Path, loaded: &Loaded| {
            if let Some(t) = loaded.not_after.filter(|t| *t < SystemTime::now()) {
                let when = httpdate::fmt_http_date(t);
                warn(format!("{}: certificate expired {when}", path.display()));
            }
        };
        if let Some((cert, key)) = &sources.pair {
            let files = [("--tls-cert", cert.as_path()), ("--tls-key", key.as_path())];
            let loaded = load_pair(cert, key, provider).map_err(|e| flagged(e, &files))?;
            check(cert, &loaded);
            store.fallback = Some(loaded.key);
        }
        if let Some(dir) = &sources.dir {
            let mut found = 0;
            let in_dir = |e: String| format!("--tls-dir {e}");
            for (cert, key) in certbot_pairs(dir).map_err(in_dir)? {
                let loaded = load_pair(&cert, &key, provider).map_err(in_dir)?;
                check(&cert, &loaded);
                store.add(loaded);
                found += 1;
            }
            if found == 0 && store.fallback.is_none() {
                return Err(format!(
                    "--tls-dir {}: no certificates (expected <name>/fullchain.pem and <name>/privkey.pem)",
                    dir.display()
                ));
            }
        }
        Ok(store)
    }

    /// One chain and key as PEM text, for every name.
    pub fn from_pem(chain: &[u8], key: &[u8], provider: &CryptoProvider) -> Result<Store, String> {
        let certified = certified_from_pem(chain, key, provider)?;
        Ok(Store {
            fallback: Some(Arc::new(certified)),
            ..Store::default()
        })
    }

    /// Names from directories read earlier win over later ones: the
    /// directory listing is sorted, so the choice does not change between
    /// reloads.
    fn add(&mut self, loaded: Loaded) {
        for name in loaded.names {
            let name = name.to_ascii_lowercase();
            let (map, key) = match name.strip_prefix("*.") {
                Some(parent) => (&mut self.wildcard, parent.to_string()),
                None => (&mut self.exact, name),
            };
            map.entry(key).or_insert_with(|| Arc::clone(&loaded.key));
        }
    }

    /// The certificate for a client that asked for `sni`: exact name, then
    /// a wildcard for its parent, then the fallback.
    pub fn choose(&self, sni: Option<&str>) -> Option<Arc<CertifiedKey>> {
        let found = sni.and_then(|name| {
            // rustls hands over the name already lower-cased and without a
            // trailing dot.
            self.exact.get(name).or_else(|| {
                let (_, parent) = name.split_once('.')?;
                self.wildcard.get(parent)
            })
        });
        found.or(self.fallback.as_ref()).cloned()
    }
}

/// A chain and its key as PEM text, checked to belong together.
pub fn certified_from_pem(
    chain: &[u8],
    key: &[u8],
    provider: &CryptoProvider,
) -> Result<CertifiedKey, String> {
    let chain = parse_chain(chain).map_err(|why| format!("certificate: {why}"))?;
    let key = parse_key(key).map_err(|why| format!("key: {why}"))?;
    certify(chain, key, provider)
}

/// A chain and key from one PEM text, without the check that they belong
/// together (see [`tls::challenge_from_pem`](crate::tls::challenge_from_pem)).
pub fn unchecked_from_pem(pem: &[u8], provider: &CryptoProvider) -> Result<CertifiedKey, String> {
    let chain = parse_chain(pem)?;
    let key = provider
        .key_provider
        .load_private_key(parse_key(pem)?)
        .map_err(|e| format!("unusable key: {e}"))?;
    Ok(CertifiedKey::new(chain, key))
}

/// The certificate and key files under a certbot-style directory, in name
/// order. Entries that are not directories (certbot's README) are skipped,
/// and so are hidden ones (`--acme-dir` keeps its versions and challenges
/// there, behind the `<name>` symlinks it swaps).
fn certbot_pairs(dir: &Path) -> Result<Vec<(PathBuf, PathBuf)>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("{}: {}", dir.display(), describe(&e)))?;
    let mut names: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().as_encoded_bytes().starts_with(b"."))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    names.sort();
    Ok(names
        .into_iter()
        .map(|d| (d.join("fullchain.pem"), d.join("privkey.pem")))
        .collect())
}

/// An error about one of `files` (`path: why`), with the flag that named
/// the file in front: `--tls-cert /nope/cert.pem: No such file or directory`.
fn flagged(e: String, files: &[(&str, &Path)]) -> String {
    for (flag, path) in files {
        if e.starts_with(&format!("{}: ", path.display())) {
            return format!("{flag} {e}");
        }
    }
    e
}

/// Reads a chain and its key and checks that they belong together.
pub fn load_pair(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<Loaded, String> {
    let chain = parse_chain(&read(cert)?).map_err(|why| in_file(cert, why))?;
    let key_der = parse_key(&read(key)?).map_err(|why| in_file(key, why))?;
    let certified = certify(chain, key_der, provider)
        .map_err(|why| format!("{}: {why} in {}", key.display(), cert.display()))?;
    Ok(described(certified))
}

/// A checked pair with what its leaf says.
pub fn described(certified: CertifiedKey) -> Loaded {
    let leaf = describe_leaf(&certified.cert[0]);
    Loaded {
        key: Arc::new(certified),
        names: leaf.names,
        not_before: leaf.not_before,
        not_after: leaf.not_after,
    }
}

/// A chain and its key, checked to belong together.
fn certify(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, String> {
    CertifiedKey::from_der(chain, key, provider).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => "does not match the certificate".to_string(),
        other => format!("unusable key: {other}"),
    })
}

fn in_file(path: &Path, why: String) -> String {
    format!("{}: {why}", path.display())
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{}: {}", path.display(), describe(&e)))
}

fn parse_chain(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let chain: Vec<_> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("not a PEM certificate file: {e}"))?;
    if chain.is_empty() {
        return Err("no certificate in the file".to_string());
    }
    Ok(chain)
}

fn parse_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
    // rustls reads PKCS#8, SEC1 and PKCS#1 keys; an encrypted one needs a
    // passphrase a server has no one to ask for.
    if contains(pem, b"ENCRYPTED PRIVATE KEY") || contains(pem, b"Proc-Type: 4,ENCRYPTED") {
        return Err(
            "the private key is encrypted (decrypt it, e.g. openssl pkey -in KEY -out KEY.plain)"
                .to_string(),
        );
    }
    PrivateKeyDer::from_pem_slice(pem)
        .map_err(|_| "no private key in the file (PEM PKCS#8, SEC1 or PKCS#1)".to_string())
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// What a leaf certificate says of itself.
struct Leaf {
    names: Vec<String>,
    not_before: Option<SystemTime>,
    not_after: Option<SystemTime>,
}

/// The DNS names a certificate is for, and when it is valid. A certificate
/// x509-parser cannot read still serves as a fallback; it just names nothing.
fn describe_leaf(der: &CertificateDer<'_>) -> Leaf {
    use x509_parser::extensions::GeneralName;
    let Ok((_, cert)) = x509_parser::parse_x509_certificate(der) else {
        return Leaf {
            names: Vec::new(),
            not_before: None,
            not_after: None,
        };
    };
    let mut names = Vec::new();
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            if let GeneralName::DNSName(dns) = name {
                names.push(dns.trim_end_matches('.').to_string());
            }
        }
    }
    let at = |t: x509_parser::time::ASN1Time| {
        let secs = u64::try_from(t.timestamp()).ok()?;
        Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs))
    };
    Leaf {
        names,
        not_before: at(cert.validity().not_before),
        not_after: at(cert.validity().not_after),
    }
}

/// Certificates kept by something other than the files the operator
/// names: ACME, which swaps them in as it obtains and renews them.
pub trait Managed: Send + Sync + std::fmt::Debug {
    /// The certificate for `name` (as rustls gives SNI: lower case, no
    /// trailing dot), if one is managed and issued.
    fn certificate(&self, name: &str) -> Option<Arc<CertifiedKey>>;
    /// The TLS-ALPN-01 challenge certificate for `name`, while a
    /// validation of it is under way.
    fn challenge(&self, name: &str) -> Option<Arc<CertifiedKey>>;
}

/// The resolver rustls asks during each handshake; `replace` swaps the
/// whole store for a reload, without touching connections in flight.
#[derive(Debug)]
pub struct Resolver {
    store: RwLock<Arc<Store>>,
    managed: Option<Arc<dyn Managed>>,
}

impl Resolver {
    pub fn new(store: Store, managed: Option<Arc<dyn Managed>>) -> Resolver {
        Resolver {
            store: RwLock::new(Arc::new(store)),
            managed,
        }
    }

    pub fn replace(&self, store: Store) {
        let mut current = self.store.write().unwrap_or_else(|p| p.into_inner());
        *current = Arc::new(store);
    }

    fn current(&self) -> Arc<Store> {
        Arc::clone(&self.store.read().unwrap_or_else(|p| p.into_inner()))
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let sni = hello.server_name();
        if let (Some(managed), Some(name)) = (&self.managed, sni) {
            // RFC 8737: a validating CA offers acme-tls/1 and nothing else;
            // without a challenge under way it gets no certificate at all.
            if offers_only_acme(hello.alpn()) {
                return managed.challenge(name);
            }
            if let Some(issued) = managed.certificate(name) {
                return Some(issued);
            }
        }
        self.current().choose(sni)
    }
}

fn offers_only_acme<'a>(alpn: Option<impl Iterator<Item = &'a [u8]>>) -> bool {
    let Some(mut protocols) = alpn else {
        return false;
    };
    protocols.next() == Some(super::ACME_TLS_ALPN) && protocols.next().is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dummy() -> Arc<CertifiedKey> {
        #[derive(Debug)]
        struct NoKey;
        impl rustls::sign::SigningKey for NoKey {
            fn choose_scheme(
                &self,
                _: &[rustls::SignatureScheme],
            ) -> Option<Box<dyn rustls::sign::Signer>> {
                None
            }
            fn algorithm(&self) -> rustls::SignatureAlgorithm {
                rustls::SignatureAlgorithm::ECDSA
            }
        }
        Arc::new(CertifiedKey::new(
            vec![CertificateDer::from(vec![1])],
            Arc::new(NoKey),
        ))
    }

    fn loaded(key: &Arc<CertifiedKey>, names: &[&str]) -> Loaded {
        Loaded {
            key: Arc::clone(key),
            names: names.iter().map(|s| s.to_string()).collect(),
            not_before: None,
            not_after: None,
        }
    }

    #[test]
    fn exact_then_wildcard_then_fallback() {
        let (a, wild, b, fallback) = (dummy(), dummy(), dummy(), dummy());
        let mut store = Store::default();
        store.add(loaded(&a, &["a.example.org"]));
        store.add(loaded(&wild, &["*.example.org", "Example.org"]));
        store.add(loaded(&b, &["a.example.org", "b.example.org"]));
        let is = |store: &Store, sni: Option<&str>, want: &Arc<CertifiedKey>| {
            assert!(Arc::ptr_eq(&store.choose(sni).unwrap(), want), "{sni:?}");
        };
        is(&store, Some("a.example.org"), &a);
        is(&store, Some("b.example.org"), &b);
        is(&store, Some("c.example.org"), &wild);
        is(&store, Some("example.org"), &wild);
        assert!(store.choose(Some("x.c.example.org")).is_none());
        assert!(store.choose(None).is_none());
        store.fallback = Some(Arc::clone(&fallback));
        is(&store, Some("x.c.example.org"), &fallback);
        is(&store, None, &fallback);
    }
}
