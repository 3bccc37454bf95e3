//! `cargo bench --bench tls_provider`: which rustls crypto provider,
//! aws-lc-rs or ring, does the server's side of TLS faster. Everything is in
//! memory (no sockets): a client and a server connection hand each other
//! their records through a buffer.
//!
//! Measured, each once per provider (see benches/README.md):
//! - `handshake-full`: a TLS 1.3 handshake with an ECDSA P-256 certificate
//!   and X25519, no resumption;
//! - `handshake-resumed`: the same, resumed with a session ticket from the
//!   provider's own ticketer (as staticd issues them);
//! - `encrypt-16k`: one 16 KB record of application data sealed with
//!   AES-128-GCM and written out (what serving a file costs per record);
//! - `decrypt-16k`: the same record opened on the other side.
//!
//! - `process-start`: this binary started again, once per iteration, to
//!   make one full handshake (both sides) with the provider and exit: what
//!   a provider costs a process that starts per connection (inetd mode);
//!   compare the two providers, not the absolute time (fork and exec).
//!
//! Every figure is CPU time (of this thread; in `process-start`, of the
//! child processes), not wall-clock time, so that other load on a shared
//! machine stays out of it. Only the server's calls are timed in the
//! handshakes (`iter_custom`): the client's work is done in the same thread
//! but left out, as a load client on another machine would be. aws-lc-rs also gets `handshake-full-mlkem`,
//! with X25519MLKEM768, the key exchange it prefers by default (and which
//! current browsers offer); ring does not implement it.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use rustls::crypto::{aws_lc_rs, ring, CryptoProvider, SupportedKxGroup};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::server::ProducesTickets;
use rustls::{
    ClientConfig, ClientConnection, ConnectionCommon, HandshakeKind, RootCertStore, ServerConfig,
    ServerConnection, SideData,
};

const RECORD: usize = 16 * 1024;

/// CPU time this thread has used. Every figure here is CPU time, not
/// wall-clock time, so that other load on a shared machine (which delays
/// the bench but does not make its work bigger) stays out of it.
fn thread_cpu() -> Duration {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// User + system CPU time of the child processes waited for so far.
fn children_cpu() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let u = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut u);
        u
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

struct Provider {
    name: &'static str,
    base: fn() -> CryptoProvider,
    ticketer: fn() -> Arc<dyn ProducesTickets>,
}

const PROVIDERS: [Provider; 2] = [
    Provider {
        name: "aws-lc-rs",
        base: aws_lc_rs::default_provider,
        ticketer: || aws_lc_rs::Ticketer::new().expect("aws-lc-rs ticketer"),
    },
    Provider {
        name: "ring",
        base: ring::default_provider,
        ticketer: || ring::Ticketer::new().expect("ring ticketer"),
    },
];

/// A self-signed ECDSA P-256 certificate for "localhost" and its key.
fn certificate() -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
    let rcgen::CertifiedKey { cert, signing_key } =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string()])
            .expect("generate certificate");
    let key = PrivatePkcs8KeyDer::from(signing_key.serialize_der());
    (cert.der().clone(), key.into())
}

/// Both ends of one provider, restricted to TLS 1.3 with AES-128-GCM and
/// the given key exchange.
struct Configs {
    server: Arc<ServerConfig>,
    /// No resumption: every handshake is a full one.
    client_full: Arc<ClientConfig>,
    /// Keeps tickets and offers them.
    client_resume: Arc<ClientConfig>,
}

fn configs(
    p: &Provider,
    kx: &'static dyn SupportedKxGroup,
    cert: &(CertificateDer<'static>, PrivateKeyDer<'static>),
) -> Configs {
    let base = (p.base)();
    let suite = base
        .cipher_suites
        .iter()
        .copied()
        .find(|s| s.suite() == rustls::CipherSuite::TLS13_AES_128_GCM_SHA256)
        .expect("provider has TLS13_AES_128_GCM_SHA256");
    let provider = Arc::new(CryptoProvider {
        cipher_suites: vec![suite],
        kx_groups: vec![kx],
        ..base
    });
    let mut server = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_no_client_auth()
        .with_single_cert(vec![cert.0.clone()], cert.1.clone_key())
        .expect("server config");
    server.ticketer = (p.ticketer)();
    let mut roots = RootCertStore::empty();
    roots.add(cert.0.clone()).expect("root");
    let client = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut client_full = client.clone();
    client_full.resumption = rustls::client::Resumption::disabled();
    Configs {
        server: Arc::new(server),
        client_full: Arc::new(client_full),
        client_resume: Arc::new(client),
    }
}

/// Moves every record `from` has to send into `to`, which processes them.
fn transfer<A: SideData, B: SideData>(
    from: &mut ConnectionCommon<A>,
    to: &mut ConnectionCommon<B>,
    buf: &mut Vec<u8>,
) {
    buf.clear();
    while from.wants_write() {
        from.write_tls(buf).expect("write_tls");
    }
    let mut rest = &buf[..];
    while !rest.is_empty() {
        to.read_tls(&mut rest).expect("read_tls");
        to.process_new_packets().expect("process_new_packets");
    }
}

/// Like `transfer`, and returns the time spent in the server's calls:
/// `server_sends` says which side the server is.
fn timed_transfer<A: SideData, B: SideData>(
    from: &mut ConnectionCommon<A>,
    to: &mut ConnectionCommon<B>,
    buf: &mut Vec<u8>,
    server_sends: bool,
) -> Duration {
    buf.clear();
    let t = thread_cpu();
    while from.wants_write() {
        from.write_tls(buf).expect("write_tls");
    }
    let sent = thread_cpu() - t;
    let mut rest = &buf[..];
    let t = thread_cpu();
    while !rest.is_empty() {
        to.read_tls(&mut rest).expect("read_tls");
        to.process_new_packets().expect("process_new_packets");
    }
    let received = thread_cpu() - t;
    if server_sends {
        sent
    } else {
        received
    }
}

/// One whole handshake, with the server's share of the time. The server's
/// tickets (sent after its Finished) are delivered, so the client can
/// resume next time.
fn handshake(c: &Configs, resume: bool, buf: &mut Vec<u8>) -> (Duration, HandshakeKind) {
    let config = if resume {
        &c.client_resume
    } else {
        &c.client_full
    };
    let name = ServerName::try_from("localhost").expect("name");
    let mut client = ClientConnection::new(config.clone(), name).expect("client");
    let t = thread_cpu();
    let mut server = ServerConnection::new(c.server.clone()).expect("server");
    let mut spent = thread_cpu() - t;
    while client.is_handshaking() || server.is_handshaking() || server.wants_write() {
        if client.wants_write() {
            spent += timed_transfer(&mut client, &mut server, buf, false);
        }
        if server.wants_write() {
            spent += timed_transfer(&mut server, &mut client, buf, true);
        }
    }
    let kind = server.handshake_kind().expect("handshake done");
    (spent, kind)
}

fn bench_handshakes(cr: &mut Criterion) {
    let cert = certificate();
    let mut group = cr.benchmark_group("server");
    for p in &PROVIDERS {
        let x25519 = if p.name == "ring" {
            ring::kx_group::X25519
        } else {
            aws_lc_rs::kx_group::X25519
        };
        let c = configs(p, x25519, &cert);
        let mut buf = Vec::new();
        group.bench_function(BenchmarkId::new("handshake-full", p.name), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (t, kind) = handshake(&c, false, &mut buf);
                    assert_eq!(kind, HandshakeKind::Full);
                    total += t;
                }
                total
            })
        });
        // Prime the client's ticket store: each resumed handshake uses one
        // ticket and is sent two new ones.
        handshake(&c, true, &mut buf);
        group.bench_function(BenchmarkId::new("handshake-resumed", p.name), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (t, kind) = handshake(&c, true, &mut buf);
                    assert_eq!(kind, HandshakeKind::Resumed);
                    total += t;
                }
                total
            })
        });
        if p.name == "aws-lc-rs" {
            let mlkem = configs(p, aws_lc_rs::kx_group::X25519MLKEM768, &cert);
            group.bench_function(BenchmarkId::new("handshake-full-mlkem", p.name), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let (t, kind) = handshake(&mlkem, false, &mut buf);
                        assert_eq!(kind, HandshakeKind::Full);
                        total += t;
                    }
                    total
                })
            });
        }
    }
    group.finish();
}

/// A client and a server connection with the handshake done and the
/// server's tickets delivered.
fn connected(c: &Configs, buf: &mut Vec<u8>) -> (ClientConnection, ServerConnection) {
    let name = ServerName::try_from("localhost").expect("name");
    let mut client = ClientConnection::new(c.client_full.clone(), name).expect("client");
    let mut server = ServerConnection::new(c.server.clone()).expect("server");
    while client.is_handshaking() || server.is_handshaking() {
        transfer(&mut client, &mut server, buf);
        transfer(&mut server, &mut client, buf);
    }
    transfer(&mut server, &mut client, buf);
    (client, server)
}

fn bench_records(cr: &mut Criterion) {
    let cert = certificate();
    let mut group = cr.benchmark_group("aes-128-gcm");
    group.throughput(Throughput::Bytes(RECORD as u64));
    let payload = vec![0x5a_u8; RECORD];
    for p in &PROVIDERS {
        let x25519 = if p.name == "ring" {
            ring::kx_group::X25519
        } else {
            aws_lc_rs::kx_group::X25519
        };
        let c = configs(p, x25519, &cert);
        let mut buf = Vec::with_capacity(2 * RECORD);
        let (_, mut server) = connected(&c, &mut buf);
        group.bench_function(BenchmarkId::new("encrypt-16k", p.name), |b| {
            b.iter_custom(|iters| {
                let t = thread_cpu();
                for _ in 0..iters {
                    server.writer().write_all(&payload).expect("write");
                    buf.clear();
                    while server.wants_write() {
                        server.write_tls(&mut buf).expect("write_tls");
                    }
                    assert!(buf.len() > RECORD && buf.len() < RECORD + 64, "one record");
                }
                thread_cpu() - t
            })
        });
        // A record can be opened only once (its sequence number moves on):
        // records are sealed in batches, untimed, and opened, timed.
        // A pair of its own: the records sealed above were never opened.
        let (mut client, mut server) = connected(&c, &mut buf);
        group.bench_function(BenchmarkId::new("decrypt-16k", p.name), |b| {
            const BATCH: u64 = 16;
            let mut plain = vec![0u8; RECORD];
            server.set_buffer_limit(None);
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let n = left.min(BATCH);
                    left -= n;
                    buf.clear();
                    for _ in 0..n {
                        server.writer().write_all(&payload).expect("write");
                        while server.wants_write() {
                            server.write_tls(&mut buf).expect("write_tls");
                        }
                    }
                    let t = thread_cpu();
                    let mut rest = &buf[..];
                    for _ in 0..n {
                        // One record in, one record's plaintext out: the
                        // client's receive buffer stays small.
                        let mut record = &rest[..RECORD + 22];
                        rest = &rest[RECORD + 22..];
                        while !record.is_empty() {
                            client.read_tls(&mut record).expect("read_tls");
                            client.process_new_packets().expect("process");
                        }
                        std::io::Read::read_exact(&mut client.reader(), &mut plain).expect("read");
                    }
                    total += thread_cpu() - t;
                }
                total
            })
        });
    }
    group.finish();
}

/// The hidden flag on which this binary, run again, is the fresh process
/// of `process-start`: `--one-handshake=PROVIDER CERT.der KEY.der`.
const ONE_HANDSHAKE: &str = "--one-handshake=";

/// In a fresh process: one full handshake (both sides) with the named
/// provider, then exit. What a provider costs a process that starts per
/// connection (staticd --inetd under tcpserver), on top of the handshake.
fn one_handshake(provider: &str, cert: &str, key: &str) {
    let p = PROVIDERS
        .iter()
        .find(|p| p.name == provider)
        .expect("known provider");
    let cert = CertificateDer::from(std::fs::read(cert).expect("cert"));
    let key = PrivatePkcs8KeyDer::from(std::fs::read(key).expect("key"));
    let x25519 = if p.name == "ring" {
        ring::kx_group::X25519
    } else {
        aws_lc_rs::kx_group::X25519
    };
    let c = configs(p, x25519, &(cert, key.into()));
    let mut buf = Vec::new();
    let (_, kind) = handshake(&c, false, &mut buf);
    assert_eq!(kind, HandshakeKind::Full);
}

fn bench_process_start(cr: &mut Criterion) {
    let (cert, key) = certificate();
    let dir = tempfile::tempdir().expect("temporary directory");
    let cert_path = dir.path().join("cert.der");
    let key_path = dir.path().join("key.der");
    std::fs::write(&cert_path, cert.as_ref()).expect("write cert");
    std::fs::write(&key_path, key.secret_der()).expect("write key");
    let me = std::env::current_exe().expect("this executable");
    let mut group = cr.benchmark_group("process-start");
    group.sample_size(20);
    for p in &PROVIDERS {
        group.bench_function(BenchmarkId::new("exec-and-full-handshake", p.name), |b| {
            // The children's CPU time (user + system), from exec to exit.
            b.iter_custom(|iters| {
                let before = children_cpu();
                for _ in 0..iters {
                    let status = std::process::Command::new(&me)
                        .arg(format!("{ONE_HANDSHAKE}{}", p.name))
                        .arg(&cert_path)
                        .arg(&key_path)
                        .status()
                        .expect("run");
                    assert!(status.success());
                }
                children_cpu() - before
            })
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    bench_handshakes,
    bench_records,
    bench_process_start
);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(provider) = args.get(1).and_then(|a| a.strip_prefix(ONE_HANDSHAKE)) {
        one_handshake(provider, &args[2], &args[3]);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
