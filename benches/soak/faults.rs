//! The faults, one at a time on a rotating schedule, from a thread of
//! their own: each records its window, so that the failures it explains
//! can be told from the ones nothing explains.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::certs::Certs;
use crate::check::{Fault, Soak, FAULTS};
use crate::server::Server;
use crate::site::Site;

pub struct Ctx {
    pub soak: Arc<Soak>,
    pub site: Site,
    pub plain: Arc<Server>,
    pub tls: Arc<Server>,
    pub certs: Certs,
    /// The log directory (a small tmpfs when mount worked).
    pub logdir: PathBuf,
    pub tmpfs: bool,
    /// Where rotated logs are moved off the tmpfs.
    pub keepdir: PathBuf,
    pub period: Duration,
    pub first: Duration,
    pub end: Instant,
}

fn sleep_until(at: Instant) {
    let now = Instant::now();
    if at > now {
        std::thread::sleep(at - now);
    }
}

pub fn run(ctx: &Ctx) {
    let soak = &ctx.soak;
    let mut at = soak.t0 + ctx.first;
    let mut cert = 0usize;
    let mut rotations = 0u32;
    let mut restarts = 0u32;
    let mut i = 0usize;
    // Mutable files also change in the background, every 2 s or so,
    // one at a time, as a site's deploys would.
    let bg = {
        let soak = soak.clone();
        let root = ctx.site.root.clone();
        let end = ctx.end;
        std::thread::spawn(move || {
            let site = Site {
                root,
                htpasswd: None,
            };
            let mut n = 0u64;
            while Instant::now() + Duration::from_secs(2) < end && !soak.stopping() {
                std::thread::sleep(Duration::from_millis(1900));
                let (url, size) = crate::site::MUTABLE[(n % 6) as usize];
                let v = soak.version_id();
                if let Err(e) = site.replace(&soak, url, crate::site::content(url, v, size)) {
                    soak.unexplained("driver error", format!("replace {url}: {e}"));
                }
                n += 1;
            }
            n
        })
    };
    while at + Duration::from_secs(8) < ctx.end && !soak.stopping() {
        sleep_until(at);
        let fault = FAULTS[i % FAULTS.len()];
        i += 1;
        at += ctx.period;
        match fault {
            Fault::CertSwap => {
                cert = 1 - cert;
                cert_swap(ctx, cert);
            }
            Fault::HeadersEdit => {
                let w = soak.fault_begins(fault, "both");
                if let Err(e) = ctx.site.write_headers(soak) {
                    soak.unexplained("driver error", format!("_headers: {e}"));
                }
                soak.fault_ends(w);
                soak.note("fault: _headers edited (new X-Soak-Rev)".into());
            }
            Fault::RedirectsEdit => {
                let w = soak.fault_begins(fault, "both");
                if let Err(e) = ctx.site.write_redirects(soak) {
                    soak.unexplained("driver error", format!("_redirects: {e}"));
                }
                soak.fault_ends(w);
                soak.note("fault: _redirects edited (new target)".into());
            }
            Fault::ReplaceFiles => {
                let w = soak.fault_begins(fault, "both");
                if let Err(e) = ctx.site.replace_all(soak) {
                    soak.unexplained("driver error", format!("replace: {e}"));
                }
                soak.fault_ends(w);
                soak.note("fault: every mutable file replaced (temp + rename)".into());
            }
            Fault::Truncate => {
                let w = soak.fault_begins(fault, "both");
                if let Err(e) = ctx.site.truncate(soak) {
                    soak.unexplained("driver error", format!("truncate: {e}"));
                }
                std::thread::sleep(Duration::from_secs(4));
                if let Err(e) = ctx.site.restore_truncated(soak) {
                    soak.unexplained("driver error", format!("restore: {e}"));
                }
                soak.fault_ends(w);
                soak.note(
                    "fault: /t/big.bin truncated in place to 1/8 for 4 s, then replaced".into(),
                );
            }
            Fault::DirChurn => {
                let w = soak.fault_begins(fault, "both");
                if let Err(e) = ctx.site.remove_churn(soak) {
                    soak.unexplained("driver error", format!("rm churn: {e}"));
                }
                std::thread::sleep(Duration::from_secs(3));
                if let Err(e) = ctx.site.recreate_churn(soak) {
                    soak.unexplained("driver error", format!("mk churn: {e}"));
                }
                soak.fault_ends(w);
                soak.note("fault: /churn/ removed for 3 s, then recreated".into());
            }
            Fault::LogRotate => {
                rotations += 1;
                let w = soak.fault_begins(fault, "both");
                rotate(ctx, rotations);
                soak.fault_ends(w);
                soak.note(format!(
                    "fault: access logs rotated (rename + SIGHUP), #{rotations}"
                ));
            }
            Fault::DiskFull => {
                if !ctx.tmpfs {
                    soak.note("fault skipped: log disk full (no tmpfs: mount failed)".into());
                    continue;
                }
                let w = soak.fault_begins(fault, "both");
                let filled = fill(&ctx.logdir);
                std::thread::sleep(Duration::from_secs(4));
                let _ = fs::remove_file(ctx.logdir.join("filler"));
                soak.fault_ends(w);
                soak.note(format!(
                    "fault: log disk filled ({filled} bytes of filler) for 4 s, then freed"
                ));
            }
            Fault::RollingRestart => {
                restarts += 1;
                let server = if restarts % 2 == 1 {
                    &ctx.plain
                } else {
                    &ctx.tls
                };
                let w = soak.fault_begins(fault, server.name);
                match server.roll(Duration::from_millis(500)) {
                    Ok((took, code)) => {
                        soak.fault_ends(w);
                        if code != Some(0) {
                            soak.unexplained(
                                "rolling restart",
                                format!("the old {} exited {code:?}", server.name),
                            );
                        }
                        soak.note(format!(
                            "fault: rolling restart of {} (--reuse-port; old stopped in {:.2} s, exit {code:?})",
                            server.name,
                            took.as_secs_f64()
                        ));
                    }
                    Err(e) => {
                        soak.fault_ends(w);
                        soak.unexplained("rolling restart", e);
                    }
                }
            }
            Fault::FdExhaustion => fd_exhaustion(ctx),
        }
    }
    let replaced = bg.join().unwrap_or(0);
    soak.note(format!(
        "background: {replaced} single-file replacements (temp + rename)"
    ));
}

fn cert_swap(ctx: &Ctx, to: usize) {
    let soak = &ctx.soak;
    let w = soak.fault_begins(Fault::CertSwap, "tls");
    let (cert, key) = &ctx.certs.pems[to];
    let ok =
        fs::write(&ctx.certs.cert_file, cert).and_then(|_| fs::write(&ctx.certs.key_file, key));
    if let Err(e) = ok {
        soak.unexplained("driver error", format!("cert write: {e}"));
    }
    soak.set("#cert", Some(ctx.certs.ders[to].clone()), None);
    ctx.tls.signal(libc::SIGHUP);
    std::thread::sleep(Duration::from_secs(2));
    soak.fault_ends(w);
    // A full handshake now must show the new certificate.
    let seen = probe_cert(ctx);
    match seen {
        Ok(der) if der == ctx.certs.ders[to] => soak.note(format!(
            "fault: TLS certificate swapped (cert {to}) + SIGHUP; new handshakes see it"
        )),
        Ok(_) => soak.unexplained(
            "certificate not reloaded",
            "a full handshake 2 s after SIGHUP still shows the old certificate".into(),
        ),
        Err(e) => soak.unexplained("certificate probe", e),
    }
}

fn probe_cert(ctx: &Ctx) -> Result<Vec<u8>, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let cfg = crate::certs::tls_client(&ctx.certs, false, b"http/1.1");
    rt.block_on(async {
        let tcp = crate::http1::tcp("127.0.0.1".parse().unwrap(), ctx.tls.port, None)
            .await
            .map_err(|e| format!("{e:?}"))?;
        let (_s, info) = crate::http1::tls(tcp, &cfg)
            .await
            .map_err(|e| format!("{e:?}"))?;
        info.cert.ok_or_else(|| "no certificate".to_string())
    })
}

fn rotate(ctx: &Ctx, n: u32) {
    let mut moved = Vec::new();
    for s in [&ctx.plain, &ctx.tls] {
        let from = ctx.logdir.join(format!("access-{}.log", s.name));
        let to = ctx.logdir.join(format!("access-{}.log.{n}", s.name));
        if fs::rename(&from, &to).is_ok() {
            moved.push(to);
        }
        s.signal(libc::SIGHUP);
    }
    // Lines already queued for the old file are written within
    // milliseconds of the reopen; then the rotated file leaves the tmpfs.
    std::thread::sleep(Duration::from_secs(2));
    for f in moved {
        let dest = ctx.keepdir.join(f.file_name().unwrap());
        if fs::copy(&f, &dest).is_ok() {
            let _ = fs::remove_file(&f);
        }
    }
}

fn fill(dir: &Path) -> u64 {
    use std::io::Write;
    let Ok(mut f) = fs::File::create(dir.join("filler")) else {
        return 0;
    };
    let block = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    loop {
        match f.write(&block) {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k as u64,
        }
    }
    // The last pages too, a byte at a time.
    while let Ok(1) = f.write(&[0u8]) {
        n += 1;
    }
    n
}

fn fd_exhaustion(ctx: &Ctx) {
    let soak = &ctx.soak;
    let s = &ctx.plain;
    let Some(open) = s.fd_count() else {
        soak.note("fault skipped: fd exhaustion (no /proc/PID/fd)".into());
        return;
    };
    let w = soak.fault_begins(Fault::FdExhaustion, s.name);
    match s.set_nofile(Some(open), None) {
        Ok(old) => {
            std::thread::sleep(Duration::from_secs(4));
            if let Err(e) = s.set_nofile(None, Some(old)) {
                soak.unexplained("driver error", format!("prlimit restore: {e}"));
            }
            soak.fault_ends(w);
            soak.note(format!(
                "fault: {} RLIMIT_NOFILE lowered to its {open} open descriptors for 4 s (prlimit), then restored to {}",
                s.name, old.rlim_cur
            ));
        }
        Err(e) => {
            soak.fault_ends(w);
            soak.note(format!("fault skipped: fd exhaustion (prlimit: {e})"));
        }
    }
}
