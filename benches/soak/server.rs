//! The staticd processes under test: started, restarted with --reuse-port,
//! signalled, sampled from /proc, and stopped.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Server {
    pub name: &'static str,
    pub idx: usize,
    pub port: u16,
    bin: PathBuf,
    args: Vec<OsString>,
    binds: usize,
    pub pid: AtomicU32,
    child: Mutex<Option<Child>>,
    /// Every stderr line of every process of this server.
    pub stderr: Arc<Mutex<Vec<String>>>,
    stderr_file: Arc<Mutex<File>>,
    pub generation: AtomicU32,
}

#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Sample {
    pub t: f64,
    pub pid: u32,
    pub rss_kib: u64,
    pub fds: u64,
    pub threads: u64,
    /// Connections the driver held open to this server then.
    pub client_conns: i64,
}

impl Server {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: &'static str,
        idx: usize,
        bin: &Path,
        port: u16,
        args: Vec<OsString>,
        binds: usize,
        out: &Path,
    ) -> std::io::Result<Arc<Server>> {
        Ok(Arc::new(Server {
            name,
            idx,
            port,
            bin: bin.to_path_buf(),
            args,
            binds,
            pid: AtomicU32::new(0),
            child: Mutex::new(None),
            stderr: Arc::new(Mutex::new(Vec::new())),
            stderr_file: Arc::new(Mutex::new(File::create(
                out.join(format!("stderr-{name}.log")),
            )?)),
            generation: AtomicU32::new(0),
        }))
    }

    /// Starts a process (with --reuse-port, so that a successor can share
    /// the port) and waits until it listens on every address.
    pub fn spawn(&self) -> Result<Child, String> {
        let gen = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let mut cmd = Command::new(&self.bin);
        cmd.args(&self.args)
            .arg("--reuse-port")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: prctl only sets a flag of the new process.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child =
            keeper_spawn(cmd).map_err(|e| format!("spawn {}: {e}", self.bin.display()))?;
        let err = child.stderr.take().unwrap();
        let lines = self.stderr.clone();
        let file = self.stderr_file.clone();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let name = self.name;
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                let _ = writeln!(file.lock().unwrap(), "[gen {gen}] {line}");
                if line.starts_with("staticd: listening on") {
                    let _ = tx.send(());
                }
                lines
                    .lock()
                    .unwrap()
                    .push(format!("{name} gen {gen}: {line}"));
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        for _ in 0..self.binds {
            let left = deadline.saturating_duration_since(Instant::now());
            if rx.recv_timeout(left).is_err() {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{} did not listen within 20 s; stderr: {:?}",
                    self.name,
                    self.stderr.lock().unwrap()
                ));
            }
        }
        Ok(child)
    }

    pub fn start(&self) -> Result<(), String> {
        let child = self.spawn()?;
        self.pid.store(child.id(), Ordering::SeqCst);
        *self.child.lock().unwrap() = Some(child);
        Ok(())
    }

    pub fn signal(&self, sig: i32) {
        let pid = self.pid.load(Ordering::SeqCst);
        if pid != 0 {
            // SAFETY: kill(2) on our own child's pid.
            unsafe {
                libc::kill(pid as i32, sig);
            }
        }
    }

    /// The rolling restart: a new process on the same port, then SIGTERM
    /// to the old one and its graceful stop. Returns the old one's exit.
    pub fn roll(&self, settle: Duration) -> Result<(Duration, Option<i32>), String> {
        let new = self.spawn()?;
        std::thread::sleep(settle);
        let old = self.child.lock().unwrap().take();
        let new_pid = new.id();
        *self.child.lock().unwrap() = Some(new);
        let Some(mut old) = old else {
            return Err("no old process".into());
        };
        let began = Instant::now();
        // SAFETY: kill(2) on our own child.
        unsafe {
            libc::kill(old.id() as i32, libc::SIGTERM);
        }
        // Sample the new one from now on.
        self.pid.store(new_pid, Ordering::SeqCst);
        let deadline = began + Duration::from_secs(30);
        loop {
            match old.try_wait() {
                Ok(Some(status)) => return Ok((began.elapsed(), status.code())),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    let _ = old.kill();
                    let _ = old.wait();
                    return Err("the old process still ran 30 s after SIGTERM".into());
                }
            }
        }
    }

    /// SIGTERM and wait (killed after 30 s). Returns the exit code.
    pub fn stop(&self) -> Option<i32> {
        let mut slot = self.child.lock().unwrap();
        let mut child = slot.take()?;
        // SAFETY: kill(2) on our own child.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match child.try_wait() {
                Ok(Some(s)) => return s.code(),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return None;
                }
            }
        }
    }

    pub fn sample(&self, t: f64, client_conns: i64) -> Option<Sample> {
        let pid = self.pid.load(Ordering::SeqCst);
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
        };
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
        Some(Sample {
            t,
            pid,
            rss_kib: field("VmRSS:")?,
            threads: field("Threads:")?,
            fds,
            client_conns,
        })
    }

    pub fn fd_count(&self) -> Option<u64> {
        let pid = self.pid.load(Ordering::SeqCst);
        Some(std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64)
    }

    /// Sets the soft RLIMIT_NOFILE of the running process; returns the old limit.
    pub fn set_nofile(
        &self,
        soft: Option<u64>,
        restore: Option<libc::rlimit>,
    ) -> std::io::Result<libc::rlimit> {
        let pid = self.pid.load(Ordering::SeqCst) as libc::pid_t;
        let mut old = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: prlimit(2) with valid pointers.
        let rc = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let new = match (soft, restore) {
            (_, Some(r)) => r,
            (Some(s), None) => libc::rlimit {
                rlim_cur: s,
                rlim_max: old.rlim_max,
            },
            (None, None) => return Ok(old),
        };
        // SAFETY: as above.
        let rc = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &new, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(old)
    }
}

type Job = (Command, std::sync::mpsc::Sender<std::io::Result<Child>>);

/// PR_SET_PDEATHSIG fires when the *thread* that forked exits, so every
/// server is forked by one thread that lives as long as the driver.
fn keeper_spawn(cmd: Command) -> std::io::Result<Child> {
    static KEEPER: Mutex<Option<std::sync::mpsc::Sender<Job>>> = Mutex::new(None);
    let tx = {
        let mut k = KEEPER.lock().unwrap();
        k.get_or_insert_with(|| {
            let (tx, rx) = std::sync::mpsc::channel::<Job>();
            std::thread::spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
                // Never exit while the driver runs: the children would die.
                loop {
                    std::thread::park();
                }
            });
            tx
        })
        .clone()
    };
    let (rtx, rrx) = std::sync::mpsc::channel();
    tx.send((cmd, rtx))
        .map_err(|_| std::io::Error::other("keeper gone"))?;
    rrx.recv()
        .map_err(|_| std::io::Error::other("keeper gone"))?
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.lock().unwrap().take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
