//! HTTPS: handshakes, certificates and their files, SNI, redirects, HSTS, resumption,
//! reloads, and TLS's failure modes, against the real binary in both modes.

#[macro_use]
mod common;

use common::*;

mod pki_self_check {
    use super::*;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use std::sync::Arc;

    /// rustls (as a server, in memory) takes every key type and encoding the tests write,
    /// and a client trusting the test root accepts the chain.
    #[test]
    fn every_key_type_and_encoding_makes_a_working_server() {
        let pki = Pki::shared();
        let cases = [
            (KeyType::EcdsaP256, KeyEncoding::Pkcs8),
            (KeyType::EcdsaP256, KeyEncoding::Sec1),
            (KeyType::Rsa2048, KeyEncoding::Pkcs8),
            (KeyType::Rsa2048, KeyEncoding::Pkcs1),
            (KeyType::Ed25519, KeyEncoding::Pkcs8),
        ];
        for (key_type, encoding) in cases {
            let leaf = pki.leaf_with(
                &["a.example", "*.b.example", "127.0.0.1"],
                key_type,
                Validity::Current,
            );
            let chain: Vec<CertificateDer> =
                CertificateDer::pem_slice_iter(leaf.chain_pem.as_bytes())
                    .collect::<Result<_, _>>()
                    .unwrap();
            assert_eq!(chain.len(), 2);
            let key = PrivateKeyDer::from_pem_slice(leaf.key_pem(encoding).as_bytes())
                .unwrap_or_else(|e| panic!("{key_type:?} {encoding:?}: {e:?}"));
            let server = rustls::ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::aws_lc_rs::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap_or_else(|e| panic!("{key_type:?} {encoding:?}: {e}"));
            for name in ["a.example", "x.b.example"] {
                let mut client = rustls::ClientConnection::new(
                    Arc::new(pki.client_config()),
                    name.to_string().try_into().unwrap(),
                )
                .unwrap();
                let mut srv = rustls::ServerConnection::new(Arc::new(server.clone())).unwrap();
                for _ in 0..10 {
                    let mut buf = Vec::new();
                    client.write_tls(&mut buf).unwrap();
                    srv.read_tls(&mut &buf[..]).unwrap();
                    srv.process_new_packets().unwrap();
                    let mut buf = Vec::new();
                    srv.write_tls(&mut buf).unwrap();
                    client.read_tls(&mut &buf[..]).unwrap();
                    client
                        .process_new_packets()
                        .unwrap_or_else(|e| panic!("{key_type:?} {name}: {e}"));
                }
                assert!(!client.is_handshaking(), "{key_type:?} {name}");
                assert_eq!(client.peer_certificates().unwrap()[0], leaf.der);
            }
        }
    }
}
