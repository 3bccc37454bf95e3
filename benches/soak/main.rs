//! `cargo bench --bench soak -- --minutes N [--out DIR] [--staticd PATH]`:
//! staticd under an hour (or N minutes) of mixed load with faults injected,
//! checking every response, the access log, memory, descriptors, threads
//! and the latency of a good client. See benches/README.md ("Soak").

mod args;
mod certs;
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

use args::{args, Args};
use certs::{make_certs, tls_client, Certs};
use check::Soak;
use load::Mode;
use server::{Sample, Server};

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

/// The soak's scratch space: the document root, the current and the
/// rotated access logs, all removed when it is dropped.
struct Dirs {
    tmp: tempfile::TempDir,
    root: PathBuf,
    logdir: PathBuf,
    keepdir: PathBuf,
}

fn make_dirs() -> Dirs {
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
    Dirs {
        tmp,
        root,
        logdir,
        keepdir,
    }
}

/// The access logs on a small tmpfs of their own, to fill it; whether the
/// mount worked.
fn mount_log_tmpfs(logdir: &Path) -> bool {
    Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256m", "soak-logs"])
        .arg(logdir)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The document root, with the files the soak checks recorded as expected.
fn make_site(soak: &Soak, dirs: &Dirs) -> site::Site {
    let hash = apr1(site::PASSWORD);
    if hash.is_none() {
        soak.note("openssl passwd -apr1 failed: basic auth not exercised".into());
    }
    let site = site::Site::create(soak, &dirs.root, hash).expect("document root");
    let gz = std::fs::read(site.disk("/pre/app.js.gz")).expect("gz");
    soak.set("/pre/app.js.gz", Some(gz), None);
    site
}

/// The two servers under test, started: "plain" (cleartext, h2c) and "tls"
/// (HTTPS, h2), on 127.0.0.1 and ::1 where there is one.
struct Pair {
    plain: Arc<Server>,
    tls: Arc<Server>,
}

fn start_servers(
    a: &Args,
    bin: &Path,
    dirs: &Dirs,
    site: &site::Site,
    certs: &Certs,
    v6: bool,
    mounted: bool,
) -> Pair {
    let root = &dirs.root;
    let logdir = &dirs.logdir;
    let mut binds = vec!["127.0.0.1"];
    if v6 {
        binds.push("::1");
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
        bin,
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
    let tls = Server::new("tls", 1, bin, tls_port, targs, binds.len(), &a.out).expect("server");
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
    Pair { plain, tls }
}

/// The load: HTTP/1.1 (keep-alive, close, pipelined) and h2c on the plain
/// server, HTTPS and h2 on the TLS one, each from its own source address.
fn spawn_load(
    rt: &tokio::runtime::Runtime,
    soak: &Arc<Soak>,
    servers: &Pair,
    certs: &Certs,
    v6: bool,
    auth: bool,
) -> Vec<tokio::task::JoinHandle<()>> {
    let (plain, tls) = (&servers.plain, &servers.tls);
    let h1cfg = tls_client(certs, true, b"http/1.1");
    let h2cfg = tls_client(certs, true, b"h2");
    let ms = Duration::from_millis;
    let mut tasks = Vec::new();
    {
        let _g = rt.enter();
        let s = soak;
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
    tasks
}

/// The client of a host 127.0.0.`n`: each load has its own.
fn src(n: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, n])
}

/// The good client on a thread and runtime of its own, so that its
/// latencies are the server's, not the driver's own queueing.
fn spawn_good(soak: &Arc<Soak>, plain: &Arc<Server>) -> std::thread::JoinHandle<()> {
    let (soak, plain) = (soak.clone(), plain.clone());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(load::good(soak, plain, src(11)));
    })
}

/// Samples of both servers every 10 s until `end`.
type Samples = Arc<Mutex<Vec<(String, Sample)>>>;

fn spawn_sampler(
    soak: &Arc<Soak>,
    servers: &Pair,
    end: Instant,
) -> (Samples, std::thread::JoinHandle<()>) {
    let (plain, tls) = (&servers.plain, &servers.tls);
    let samples: Samples = Arc::default();
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
    (samples, sampler)
}

/// A line of progress every minute until `end`.
fn show_progress(soak: &Soak, end: Instant) {
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
}

/// Stops the load: the clients (the good one too), then the slow ones,
/// then the sampler.
fn wind_down_load(
    rt: &tokio::runtime::Runtime,
    soak: &Soak,
    load: Vec<tokio::task::JoinHandle<()>>,
    slow: Vec<tokio::task::JoinHandle<()>>,
    threads: [std::thread::JoinHandle<()>; 2],
) {
    soak.stop.store(true, Ordering::SeqCst);
    rt.block_on(async {
        for t in load {
            let _ = tokio::time::timeout(Duration::from_secs(30), t).await;
        }
    });
    let [good, sampler] = threads;
    let _ = good.join();
    soak.stop_slow.store(true, Ordering::SeqCst);
    rt.block_on(async {
        for t in slow {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    });
    let _ = sampler.join();
}

/// The access logs, rotated and current.
fn access_logs(dirs: &Dirs) -> Vec<PathBuf> {
    let (keepdir, logdir) = (&dirs.keepdir, &dirs.logdir);
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
    logs
}

/// The soak in its steps: the scratch space and the site, the two servers,
/// the load, the faults and the samples until the time is up, then the
/// wind-down and the report.
fn main() {
    let a = args();
    let run = Duration::from_secs_f64(a.minutes * 60.0);
    let short = a.minutes <= 5.0;
    std::fs::create_dir_all(&a.out).expect("--out");
    let bin = find_staticd(a.staticd.clone());
    let dirs = make_dirs();
    let mounted = mount_log_tmpfs(&dirs.logdir);
    let _tmpfs = Tmpfs(mounted.then(|| dirs.logdir.clone()));
    let soak = Soak::new();
    if !mounted {
        soak.note(
            "mount -t tmpfs failed (not root?): the log-disk-full fault will be skipped".into(),
        );
    }
    let certs = make_certs(dirs.tmp.path());
    soak.set("#cert", Some(certs.ders[0].clone()), None);
    let site = make_site(&soak, &dirs);
    let v6 = std::net::TcpListener::bind("[::1]:0").is_ok();
    if !v6 {
        soak.note("no ::1 on this machine: IPv4 clients only".into());
    }
    let servers = start_servers(&a, &bin, &dirs, &site, &certs, v6, mounted);

    let end = soak.t0 + run;
    let auth = site.htpasswd.is_some();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let tasks = spawn_load(&rt, &soak, &servers, &certs, v6, auth);
    let good = spawn_good(&soak, &servers.plain);
    let (plain, tls) = (servers.plain.clone(), servers.tls.clone());
    let slow = vec![
        rt.spawn(load::slowloris(soak.clone(), plain.clone(), src(12))),
        rt.spawn(load::slowloris(soak.clone(), tls.clone(), src(13))),
        rt.spawn(load::slow_reader(soak.clone(), plain.clone(), src(14))),
    ];
    let (samples, sampler) = spawn_sampler(&soak, &servers, end);
    let ctx = faults::Ctx {
        soak: soak.clone(),
        site,
        plain: plain.clone(),
        tls: tls.clone(),
        certs,
        logdir: dirs.logdir.clone(),
        tmpfs: mounted,
        keepdir: dirs.keepdir.clone(),
        period: Duration::from_secs(if short { 15 } else { 30 }),
        first: Duration::from_secs(20),
        end,
    };
    let fault_thread = std::thread::spawn(move || {
        faults::run(&ctx);
        ctx
    });
    show_progress(&soak, end);
    wind_down_load(&rt, &soak, tasks, slow, [good, sampler]);
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
    let logs = access_logs(&dirs);
    let stderr: Vec<String> = [&plain, &tls]
        .iter()
        .flat_map(|s| s.stderr.lock().unwrap().clone())
        .collect();
    let samples = samples.lock().unwrap().clone();
    let ok = report::finish(&soak, &a, run, short, &logs, &stderr, &samples);
    drop(ctx);
    drop(_tmpfs);
    // exit() runs no destructors: the document root and the logs go now.
    drop(dirs);
    std::process::exit(if ok { 0 } else { 1 });
}
