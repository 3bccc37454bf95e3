//! A userspace stand-in for `netem delay D rate R limit L` on each direction (this kernel has
//! no sch_netem): two TUN devices; every IP packet read from one is written to the other after
//! a bottleneck of R bit/s (serialisation) plus D of propagation delay, at most L packets held
//! in all (tail drop), as netem's rate+delay+limit do.
//! usage: pathemu TUN_A TUN_B RATE_BPS DELAY_MS LIMIT_PKTS
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

fn tun(name: &str) -> File {
    let fd = unsafe { libc::open(b"/dev/net/tun\0".as_ptr() as *const _, libc::O_RDWR | libc::O_CLOEXEC) };
    assert!(fd >= 0, "open /dev/net/tun");
    let mut ifr = [0u8; 40];
    ifr[..name.len()].copy_from_slice(name.as_bytes());
    let flags: i16 = (libc::IFF_TUN | libc::IFF_NO_PI) as i16;
    ifr[16..18].copy_from_slice(&flags.to_ne_bytes());
    let r = unsafe { libc::ioctl(fd, 0x400454ca /* TUNSETIFF */, ifr.as_mut_ptr()) };
    assert!(r == 0, "TUNSETIFF {}: {}", name, std::io::Error::last_os_error());
    unsafe { File::from_raw_fd(fd) }
}

struct Q { q: Mutex<VecDeque<(Instant, Instant, Vec<u8>)>>, cv: Condvar }

fn direction(mut rx: File, mut tx: File, rate: f64, delay: Duration, limit: usize, label: &'static str, drops: Arc<AtomicU64>, pkts: Arc<AtomicU64>) {
    let q = Arc::new(Q { q: Mutex::new(VecDeque::new()), cv: Condvar::new() });
    let q2 = Arc::clone(&q);
    std::thread::spawn(move || loop {
        let mut g = q2.q.lock().unwrap();
        loop {
            let now = Instant::now();
            match g.front() {
                Some((_, due, _)) if *due <= now => {
                    let (_, _, p) = g.pop_front().unwrap();
                    drop(g);
                    let _ = tx.write(&p);
                    g = q2.q.lock().unwrap();
                }
                Some((_, due, _)) => { let d = *due - now; g = q2.cv.wait_timeout(g, d).unwrap().0; }
                None => { g = q2.cv.wait(g).unwrap(); }
            }
        }
    });
    let _ = label;
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 65536];
        let mut free = Instant::now(); // when the bottleneck link is next free
        loop {
            let n = match rx.read(&mut buf) { Ok(n) => n, Err(_) => continue };
            let now = Instant::now();
            let mut g = q.q.lock().unwrap();
            // as netem's `limit`: every packet held, waiting for the rate or the delay
            if g.len() >= limit { drops.fetch_add(1, Ordering::Relaxed); continue; }
            let start = if free > now { free } else { now };
            let dep = start + Duration::from_secs_f64(n as f64 * 8.0 / rate);
            free = dep;
            g.push_back((dep, dep + delay, buf[..n].to_vec()));
            pkts.fetch_add(1, Ordering::Relaxed);
            drop(g);
            q.cv.notify_one();
        }
    });
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let rate: f64 = a[3].parse().unwrap();
    let delay = Duration::from_secs_f64(a[4].parse::<f64>().unwrap() / 1000.0);
    let limit: usize = a[5].parse().unwrap();
    let ta = tun(&a[1]);
    let tb = tun(&a[2]);
    let (ta2, tb2) = (ta.try_clone().unwrap(), tb.try_clone().unwrap());
    let _ = (ta.as_raw_fd(), tb.as_raw_fd());
    let (d1, d2, p1, p2) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    direction(ta, tb2, rate, delay, limit, "a->b", d1.clone(), p1.clone());
    direction(tb, ta2, rate, delay, limit, "b->a", d2.clone(), p2.clone());
    eprintln!("pathemu: {} <-> {} rate {} bit/s delay {:?} each way, limit {} pkts", a[1], a[2], rate, delay, limit);
    loop {
        std::thread::sleep(Duration::from_secs(10));
        eprintln!("pathemu: {}->{} pkts {} drops {}; {}->{} pkts {} drops {}", a[1], a[2], p1.load(Ordering::Relaxed), d1.load(Ordering::Relaxed), a[2], a[1], p2.load(Ordering::Relaxed), d2.load(Ordering::Relaxed));
    }
}
