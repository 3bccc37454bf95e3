//! `cargo bench --bench soak -- --minutes N [--out DIR] [--staticd PATH]`:
//! staticd under an hour (or N minutes) of mixed load with faults injected,
//! checking every response, the access log, memory, descriptors, threads
//! and the latency of a good client. See benches/README.md ("Soak").

mod check;
mod faults;
mod http1;
mod load;
mod report;
mod server;
mod site;

use std::ffi::OsString;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls::client::Resumption;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

use check::Soak;
use load::Mode;
use server::{Sample, Server};

pub struct Args {
    minutes: f64,
    out: PathBuf,
    staticd: Option<PathBuf>,
}

fn args() -> Args {
    let mut a = Args {
        minutes: 3.0,
        out: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/soak"),
        staticd: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        match x.as_str() {
            "--minutes" => a.minutes = it.next().and_then(|v| v.parse().ok()).expect("--minutes N"),
            "--out" => a.out = it.next().map(PathBuf::from).expect("--out DIR"),
            "--staticd" => a.staticd = it.next().map(PathBuf::from),
            "--bench" => {}
            other => {
                eprintln!("soak: unknown argument {other}; usage: --minutes N [--out DIR] [--staticd PATH]");
                std::process::exit(2);
            }
        }
    }
    a
}

static CA: Mutex<Option<CertificateDer<'static>>> = Mutex::new(None);

/// A client trusting the soak CA only (both certificates chain to it).
pub fn tls_client(_certs: &faults::Certs, resume: bool, alpn: &[u8]) -> Arc<ClientConfig> {
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

fn make_certs(dir: &Path) -> faults::Certs {
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
    let certs = faults::Certs {
        pems: [a, b],
        ders: [da, db],
        cert_file: dir.join("cert.pem"),
        key_file: dir.join("key.pem"),
    };
    std::fs::write(&certs.cert_file, &certs.pems[0].0).expect("write cert");
    std::fs::write(&certs.key_file, &certs.pems[0].1).expect("write key");
    certs
}

fn apr1(password: &str) -> Option<String> {
    let out = Command::new("openssl")
        .args(["passwd", "-apr1", password])
        .output()
        .ok()?;
    let h = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && h.starts_with("$apr1$")).then_some(h)
}

fn free_port(v6: bool) -> u16 {
    loop {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().unwrap().port();
        if !v6 || std::net::TcpListener::bind(("::1", port)).is_ok() {
            return port;
        }
    }
}

/// The staticd to soak: `--staticd PATH`, else the binary cargo built for
/// this bench, with the bench profile (the release settings: LTO) and this
/// build's features, so a stale or differently featured
/// target/release/staticd is never what gets tested.
fn find_staticd(given: Option<PathBuf>) -> PathBuf {
    let bin = given.unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_staticd")));
    if !bin.exists() {
        eprintln!(
            "soak: {} does not exist (cargo bench --bench soak builds it)",
            bin.display()
        );
        std::process::exit(1);
    }
    bin
}

struct Tmpfs(Option<PathBuf>);
impl Drop for Tmpfs {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = Command::new("umount").arg("-l").arg(&p).status();
        }
    }
}

fn main() {
    let a = args();
    let run = Duration::from_secs_f64(a.minutes * 60.0);
    let short = a.minutes <= 5.0;
    std::fs::create_dir_all(&a.out).expect("--out");
    let bin = find_staticd(a.staticd.clone());
    let tmp = tempfile::Builder::new()
        .prefix("staticd-soak")
        .tempdir()
        .expect("tempdir");
    let root = tmp.path().join("www");
    let logdir = tmp.path().join("logs");
    let keepdir = tmp.path().join("rotated");
    for d in [&root, &logdir, &keepdir] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    // The access logs on a small tmpfs of their own, to fill it.
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256m", "soak-logs"])
        .arg(&logdir)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let _tmpfs = Tmpfs(mounted.then(|| logdir.clone()));
    let soak = Soak::new();
    if !mounted {
        soak.note(
            "mount -t tmpfs failed (not root?): the log-disk-full fault will be skipped".into(),
        );
    }
    let certs = make_certs(tmp.path());
    soak.set("#cert", Some(certs.ders[0].clone()), None);
    let hash = apr1(site::PASSWORD);
    if hash.is_none() {
        soak.note("openssl passwd -apr1 failed: basic auth not exercised".into());
    }
    let site = site::Site::create(&soak, &root, hash).expect("document root");
    let gz = std::fs::read(site.disk("/pre/app.js.gz")).expect("gz");
    soak.set("/pre/app.js.gz", Some(gz), None);
    let v6 = std::net::TcpListener::bind("[::1]:0").is_ok();
    let mut binds = vec!["127.0.0.1"];
    if v6 {
        binds.push("::1");
    } else {
        soak.note("no ::1 on this machine: IPv4 clients only".into());
    }
    let common = |port: u16, name: &str| -> Vec<OsString> {
        let mut v: Vec<OsString> = vec![
            "--root".into(),
            root.clone().into(),
            "--port".into(),
            port.to_string().into(),
        ];
        for b in &binds {
            v.push("--bind".into());
            v.push((*b).into());
        }
        v.extend(
            [
                "--threads",
                "2",
                "--listing",
                "--cgi",
                "--compress-cache",
                "8",
            ]
            .map(OsString::from),
        );
        v.push("--log-file".into());
        v.push(logdir.join(format!("access-{name}.log")).into());
        if let Some(h) = &site.htpasswd {
            let mut x = OsString::from("/private=");
            x.push(h);
            v.push("--auth".into());
            v.push(x);
        }
        v
    };
    let plain_port = free_port(v6);
    let tls_port = free_port(v6);
    let plain = Server::new(
        "plain",
        0,
        &bin,
        plain_port,
        common(plain_port, "plain"),
        binds.len(),
        &a.out,
    )
    .expect("server");
    let mut targs = common(tls_port, "tls");
    targs.extend([
        "--tls-cert".into(),
        certs.cert_file.clone().into(),
        "--tls-key".into(),
        certs.key_file.clone().into(),
    ]);
    let tls = Server::new("tls", 1, &bin, tls_port, targs, binds.len(), &a.out).expect("server");
    for s in [&plain, &tls] {
        if let Err(e) = s.start() {
            eprintln!("soak: {e}");
            std::process::exit(1);
        }
    }
    println!(
        "soak: {} for {:.1} min: plain on port {plain_port}, HTTPS on {tls_port}, root {}, logs {} ({}), output {}",
        bin.display(),
        a.minutes,
        root.display(),
        logdir.display(),
        if mounted { "tmpfs 256 MiB" } else { "no tmpfs" },
        a.out.display()
    );

    let end = soak.t0 + run;
    let auth = site.htpasswd.is_some();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let src = |n: u8| IpAddr::from([127, 0, 0, n]);
    let h1cfg = tls_client(&certs, true, b"http/1.1");
    let h2cfg = tls_client(&certs, true, b"h2");
    let ms = Duration::from_millis;
    let mut tasks = Vec::new();
    {
        let _g = rt.enter();
        let s = &soak;
        tasks.push(tokio::spawn(load::h1(
            s.clone(),
            plain.clone(),
            src(2),
            Mode::KeepAlive,
            None,
            "http/1.1 keep-alive",
            ms(10),
            1,
            auth,
        )));
        tasks.push(tokio::spawn(load::h1(
            s.clone(),
            plain.clone(),
            src(3),
            Mode::KeepAlive,
            None,
            "http/1.1 keep-alive",
            ms(10),
            2,
            auth,
        )));
        tasks.push(tokio::spawn(load::h1(
            s.clone(),
            plain.clone(),
            src(4),
            Mode::Close,
            None,
            "http/1.1 Connection: close",
            ms(15),
            3,
            auth,
        )));
        tasks.push(tokio::spawn(load::h1(
            s.clone(),
            plain.clone(),
            src(5),
            Mode::Pipeline,
            None,
            "http/1.1 pipelined x8",
            ms(30),
            4,
            auth,
        )));
        if v6 {
            let six: IpAddr = "::1".parse().unwrap();
            tasks.push(tokio::spawn(load::h1(
                s.clone(),
                plain.clone(),
                six,
                Mode::KeepAlive,
                None,
                "http/1.1 keep-alive [::1]",
                ms(20),
                5,
                auth,
            )));
            tasks.push(tokio::spawn(load::h1(
                s.clone(),
                tls.clone(),
                six,
                Mode::Close,
                Some(h1cfg.clone()),
                "https close, resuming [::1]",
                ms(60),
                6,
                auth,
            )));
        }
        tasks.push(tokio::spawn(load::h2(
            s.clone(),
            plain.clone(),
            src(6),
            None,
            "h2c x16 streams",
            16,
            ms(80),
            7,
            auth,
        )));
        tasks.push(tokio::spawn(load::h1(
            s.clone(),
            tls.clone(),
            src(7),
            Mode::Close,
            Some(h1cfg.clone()),
            "https close, resuming",
            ms(25),
            8,
            auth,
        )));
        tasks.push(tokio::spawn(load::h1(
            s.clone(),
            tls.clone(),
            src(8),
            Mode::KeepAlive,
            Some(h1cfg.clone()),
            "https keep-alive",
            ms(15),
            9,
            auth,
        )));
        tasks.push(tokio::spawn(load::h1(
            s.clone(),
            tls.clone(),
            src(9),
            Mode::Pipeline,
            Some(h1cfg.clone()),
            "https pipelined x8",
            ms(40),
            10,
            auth,
        )));
        tasks.push(tokio::spawn(load::h2(
            s.clone(),
            tls.clone(),
            src(10),
            Some(h2cfg.clone()),
            "h2 (TLS) x32 streams",
            32,
            ms(150),
            11,
            auth,
        )));
    }
    // The good client on a thread and runtime of its own, so that its
    // latencies are the server's, not the driver's own queueing.
    let good = {
        let (soak, plain) = (soak.clone(), plain.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(load::good(soak, plain, src(11)));
        })
    };
    let slow = vec![
        rt.spawn(load::slowloris(soak.clone(), plain.clone(), src(12))),
        rt.spawn(load::slowloris(soak.clone(), tls.clone(), src(13))),
        rt.spawn(load::slow_reader(soak.clone(), plain.clone(), src(14))),
    ];

    // Samples of both servers every 10 s.
    let samples: Arc<Mutex<Vec<(String, Sample)>>> = Arc::default();
    let sampler = {
        let soak = soak.clone();
        let samples = samples.clone();
        let servers = [plain.clone(), tls.clone()];
        std::thread::spawn(move || {
            let mut next = soak.t0;
            while Instant::now() < end {
                for s in &servers {
                    let conns = soak.open[s.idx].load(Ordering::Relaxed);
                    if let Some(x) = s.sample(soak.secs(Instant::now()), conns) {
                        samples.lock().unwrap().push((s.name.to_string(), x));
                    }
                }
                next += Duration::from_secs(10);
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                }
            }
        })
    };
    let ctx = faults::Ctx {
        soak: soak.clone(),
        site,
        plain: plain.clone(),
        tls: tls.clone(),
        certs,
        logdir: logdir.clone(),
        tmpfs: mounted,
        keepdir: keepdir.clone(),
        period: Duration::from_secs(if short { 15 } else { 30 }),
        first: Duration::from_secs(20),
        end,
    };
    let fault_thread = std::thread::spawn(move || {
        faults::run(&ctx);
        ctx
    });
    // Progress every minute.
    while Instant::now() < end {
        std::thread::sleep(
            Duration::from_secs(1).min(end.saturating_duration_since(Instant::now())),
        );
        let t = soak.secs(Instant::now()) as u64;
        if t > 0 && t.is_multiple_of(60) {
            let total: u64 = soak.tally.lock().unwrap().requests.values().sum();
            let bad: u64 = soak.tally.lock().unwrap().unexplained.values().sum();
            println!("soak: [{t:5} s] {total} requests, {bad} unexplained failures");
            std::thread::sleep(Duration::from_millis(1000));
        }
    }
    soak.stop.store(true, Ordering::SeqCst);
    rt.block_on(async {
        for t in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(30), t).await;
        }
    });
    let _ = good.join();
    soak.stop_slow.store(true, Ordering::SeqCst);
    rt.block_on(async {
        for t in slow {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    });
    let _ = sampler.join();
    let ctx = fault_thread.join().expect("fault thread");
    for s in [&plain, &tls] {
        let code = s.stop();
        if code != Some(0) {
            soak.unexplained(
                "server exit",
                format!("{} exited {code:?} after SIGTERM", s.name),
            );
        }
    }
    rt.shutdown_timeout(Duration::from_secs(2));
    // The logs, rotated and current.
    let mut logs = Vec::new();
    for d in [&keepdir, &logdir] {
        if let Ok(rd) = std::fs::read_dir(d) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with("access-") {
                    logs.push(e.path());
                }
            }
        }
    }
    let stderr: Vec<String> = [&plain, &tls]
        .iter()
        .flat_map(|s| s.stderr.lock().unwrap().clone())
        .collect();
    let samples = samples.lock().unwrap().clone();
    let ok = report::finish(&soak, &a, run, short, &logs, &stderr, &samples);
    drop(ctx);
    drop(_tmpfs);
    // exit() runs no destructors: the document root and the logs go now.
    drop(tmp);
    std::process::exit(if ok { 0 } else { 1 });
}
