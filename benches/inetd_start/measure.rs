//! Start to first response byte of `staticd --inetd`, A/B between builds,
//! against the floor of spawning /bin/true: the same measurement as the
//! harness's `inetd_spawn` (benches/compare/startup.rs), standing alone so
//! that several binaries can be alternated round by round on a noisy
//! machine. Plain std, built by `benches/inetd_start.sh` with rustc (not a
//! cargo bench target: it needs nothing from the crate).
//!
//! measure ROUNDS RUNS BINARY... : each round times RUNS spawns (after 10
//! unmeasured ones) of /bin/true and of every BINARY, in an order that
//! rotates each round; prints each round's p50 and, at the end, per binary
//! the median of the rounds' p50s, the pooled p50 and p99, and the gap to
//! /bin/true.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WARM_RUNS: u32 = 10;
const SIZE: usize = 1000;

fn request() -> String {
    format!("GET /{SIZE}.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
}

/// One spawn of `staticd --inetd` on an accepted socket whose request is
/// already written; spawn to first response byte, response checked.
fn inetd_once(listener: &TcpListener, staticd: &Path, root: &Path) -> io::Result<Duration> {
    let mut client = TcpStream::connect(listener.local_addr()?)?;
    let (accepted, _) = listener.accept()?;
    client.write_all(request().as_bytes())?;
    let stdin: OwnedFd = accepted.into();
    let stdout = stdin.try_clone()?;
    let mut cmd = Command::new(staticd);
    cmd.arg("--inetd")
        .arg("--root")
        .arg(root)
        .args(["--log-format", "off"])
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::null());
    let start = Instant::now();
    let mut child = cmd.spawn()?;
    drop(cmd);
    client.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut buf = vec![0u8; 64 * 1024];
    let n = client.read(&mut buf)?;
    let at = Instant::now();
    let mut all = buf[..n].to_vec();
    client.read_to_end(&mut all)?;
    let status = child.wait()?;
    let head_end = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| io::Error::other("no response head"))?;
    if !all.starts_with(b"HTTP/1.1 200") || all.len() - head_end - 4 != SIZE || !status.success() {
        return Err(io::Error::other(format!(
            "{}: unexpected response or exit ({status})",
            staticd.display()
        )));
    }
    Ok(at - start)
}

/// The floor: spawn /bin/true and reap it.
fn true_once() -> io::Result<Duration> {
    let mut cmd = Command::new("/bin/true");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let start = Instant::now();
    cmd.spawn()?.wait()?;
    Ok(start.elapsed())
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    let i = ((p * sorted.len() as f64).ceil() as usize).max(1) - 1;
    sorted[i]
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        eprintln!("usage: measure ROUNDS RUNS BINARY...");
        std::process::exit(2);
    }
    let rounds: usize = args[0].parse().expect("ROUNDS");
    let runs: u32 = args[1].parse().expect("RUNS");
    let mut names = vec!["/bin/true".to_string()];
    names.extend(args[2..].iter().cloned());

    let root = std::env::temp_dir().join(format!("inetd-start-{}", std::process::id()));
    std::fs::create_dir_all(&root)?;
    std::fs::write(root.join(format!("{SIZE}.bin")), vec![b'x'; SIZE])?;
    let listener = TcpListener::bind("127.0.0.1:0")?;

    let once = |which: usize| -> io::Result<Duration> {
        match which {
            0 => true_once(),
            _ => inetd_once(&listener, &PathBuf::from(&names[which]), &root),
        }
    };
    let mut round_p50 = vec![Vec::new(); names.len()];
    let mut pooled = vec![Vec::new(); names.len()];
    for round in 0..rounds {
        let mut line = format!("round {round}:");
        for k in 0..names.len() {
            let which = (k + round) % names.len();
            let mut t = Vec::with_capacity(runs as usize);
            for i in 0..WARM_RUNS + runs {
                let d = once(which)?;
                if i >= WARM_RUNS {
                    t.push(d.as_secs_f64() * 1e6);
                }
            }
            t.sort_by(f64::total_cmp);
            let p50 = pct(&t, 0.5);
            line += &format!("  [{which}] {p50:.0}");
            round_p50[which].push(p50);
            pooled[which].extend(t);
        }
        println!("{line} us");
    }
    let floor = median(round_p50[0].clone());
    println!("\nbinary: median of round p50s / pooled p50 / pooled p99 (us), gap to /bin/true");
    for (which, name) in names.iter().enumerate() {
        let m = median(round_p50[which].clone());
        let mut all = pooled[which].clone();
        all.sort_by(f64::total_cmp);
        println!(
            "[{which}] {name}: {m:.0} / {:.0} / {:.0}  (+{:.0})",
            pct(&all, 0.5),
            pct(&all, 0.99),
            m - floor
        );
    }
    std::fs::remove_dir_all(&root)?;
    Ok(())
}
