//! One HTTP/3 GET on one quinn connection, with chosen receive windows.
//! usage: qget ADDR:PORT PATH [STREAM_WINDOW [CONN_WINDOW]]
use bytes::Buf;
use std::{sync::Arc, time::Instant};

#[derive(Debug)]
struct Any;
impl rustls::client::danger::ServerCertVerifier for Any {
    fn verify_server_cert(&self, _: &rustls::pki_types::CertificateDer<'_>, _: &[rustls::pki_types::CertificateDer<'_>], _: &rustls::pki_types::ServerName<'_>, _: &[u8], _: rustls::pki_types::UnixTime) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> { Ok(rustls::client::danger::ServerCertVerified::assertion()) }
    fn verify_tls12_signature(&self, _: &[u8], _: &rustls::pki_types::CertificateDer<'_>, _: &rustls::DigitallySignedStruct) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> { Ok(rustls::client::danger::HandshakeSignatureValid::assertion()) }
    fn verify_tls13_signature(&self, _: &[u8], _: &rustls::pki_types::CertificateDer<'_>, _: &rustls::DigitallySignedStruct) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> { Ok(rustls::client::danger::HandshakeSignatureValid::assertion()) }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> { rustls::crypto::ring::default_provider().signature_verification_algorithms.supported_schemes() }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let a: Vec<String> = std::env::args().collect();
    let addr: std::net::SocketAddr = a[1].parse().unwrap();
    let path = &a[2];
    let sw: Option<u32> = a.get(3).map(|s| s.parse().unwrap());
    let cw: Option<u64> = a.get(4).map(|s| s.parse().unwrap());
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut tls = rustls::ClientConfig::builder().dangerous().with_custom_certificate_verifier(Arc::new(Any)).with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let mut cc = quinn::ClientConfig::new(Arc::new(quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap()));
    let mut t = quinn::TransportConfig::default();
    if let Some(sw) = sw { t.stream_receive_window(sw.into()); }
    if let Some(cw) = cw { t.receive_window(quinn::VarInt::from_u64(cw).unwrap()); }
    cc.transport_config(Arc::new(t));
    let mut ep = quinn::Endpoint::client("0.0.0.0:0".parse().unwrap()).unwrap();
    ep.set_default_client_config(cc);
    let t0 = Instant::now();
    let conn = ep.connect(addr, "localhost").unwrap().await.unwrap();
    let (mut driver, mut send) = h3::client::new(h3_quinn::Connection::new(conn.clone())).await.unwrap();
    let drive = tokio::spawn(async move { let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await; });
    let t_conn = Instant::now();
    let req = http::Request::get(format!("https://{}{}", a[1], path)).body(()).unwrap();
    let mut s = send.send_request(req).await.unwrap();
    s.finish().await.unwrap();
    let resp = s.recv_response().await.unwrap();
    let mut n = 0usize; let mut first = None;
    while let Some(c) = s.recv_data().await.unwrap() { if first.is_none() { first = Some(Instant::now()); } n += c.remaining(); }
    let t_end = Instant::now();
    let body = (t_end - t_conn).as_secs_f64();
    let st = conn.stats();
    println!("status={} bytes={} handshake={:.3}s ttfb={:.3}s total_req={:.3}s goodput={:.1}Mbit/s rtt_est={:?} cwnd_srv=n/a lost_pkts_seen_by_client=n/a rx_dgrams={}",
        resp.status().as_u16(), n, (t_conn - t0).as_secs_f64(), (first.unwrap() - t_conn).as_secs_f64(), body, n as f64 * 8.0 / body / 1e6, st.path.rtt, st.udp_rx.datagrams);
    drop(send); conn.close(0u32.into(), b""); ep.wait_idle().await; drive.abort();
}
