//! The soak's certificates: a CA of its own, two leaves chained to it
//! (the second for the certificate swap fault), and the TLS clients that
//! trust that CA alone.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls::client::Resumption;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

/// The two leaves (PEM chain and key, DER) and where the served one is.
pub struct Certs {
    pub pems: [(String, String); 2],
    pub ders: [Vec<u8>; 2],
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

static CA: Mutex<Option<CertificateDer<'static>>> = Mutex::new(None);

/// A client trusting the soak CA only (both certificates chain to it).
pub fn tls_client(_certs: &Certs, resume: bool, alpn: &[u8]) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots
        .add(CA.lock().unwrap().clone().expect("CA made"))
        .expect("valid CA");
    let mut c = ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS 1.3 and 1.2")
    .with_root_certificates(roots)
    .with_no_client_auth();
    c.resumption = if resume {
        Resumption::in_memory_sessions(256)
    } else {
        Resumption::disabled()
    };
    c.alpn_protocols = vec![alpn.to_vec()];
    Arc::new(c)
}

pub fn make_certs(dir: &Path) -> Certs {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair,
        KeyUsagePurpose,
    };
    let mut ca = CertificateParams::default();
    ca.distinguished_name
        .push(DnType::CommonName, "staticd soak CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().expect("key")).expect("CA");
    *CA.lock().unwrap() = Some(ca.der().clone());
    let leaf = |n: u8| {
        let mut p = CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .expect("params");
        p.distinguished_name
            .push(DnType::CommonName, format!("soak leaf {n}"));
        p.not_before = rcgen::date_time_ymd(2020, 1, 1);
        p.not_after = rcgen::date_time_ymd(2999, 1, 1);
        let key = KeyPair::generate().expect("key");
        let cert = p.signed_by(&key, &ca).expect("leaf");
        (
            (format!("{}{}", cert.pem(), ca.pem()), key.serialize_pem()),
            cert.der().to_vec(),
        )
    };
    let (a, da) = leaf(0);
    let (b, db) = leaf(1);
    let certs = Certs {
        pems: [a, b],
        ders: [da, db],
        cert_file: dir.join("cert.pem"),
        key_file: dir.join("key.pem"),
    };
    std::fs::write(&certs.cert_file, &certs.pems[0].0).expect("write cert");
    std::fs::write(&certs.key_file, &certs.pems[0].1).expect("write key");
    certs
}
