//! The programs the seed tables start themselves (Tomcat, Varnish, Squid,
//! Hitch): each in its own process group, logging into its own directory,
//! watched by the reaper, stopped (the whole group) when dropped; and a
//! small HTTP/1.1 client that reads the response headers a cache adds.

use std::fs;
use std::io;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rustls::ClientConfig;

use crate::{procstat, reaper};

/// A started program; its process group is stopped when dropped.
pub struct Proc {
    child: Child,
    /// Its scratch directory (config, pid file, `output.log`).
    pub dir: PathBuf,
    /// How long it is given to stop on SIGTERM before the group is killed.
    grace: Duration,
}

impl Proc {
    /// Starts `cmd` in `dir` with stdout and stderr in `dir/output.log`.
    pub fn spawn(mut cmd: Command, dir: &Path, grace: Duration) -> Result<Proc, String> {
        let log = fs::File::create(dir.join("output.log")).map_err(|e| e.to_string())?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
        cmd.stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .current_dir(dir)
            .process_group(0);
        reaper::die_with_parent(&mut cmd);
        let program = cmd.get_program().to_string_lossy().to_string();
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {program}: {e}"))?;
        reaper::watch(child.id());
        Ok(Proc {
            child,
            dir: dir.to_path_buf(),
            grace,
        })
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// None while running; otherwise why not, with the end of its log.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(None) => None,
            Ok(Some(status)) => Some(format!("exited ({status}){}", self.log_tail())),
            Err(e) => Some(format!("cannot wait: {e}")),
        }
    }

    /// The last few lines of what it wrote (and of `extra` logs in its
    /// directory, such as Squid's cache.log).
    pub fn log_tail(&self) -> String {
        let mut out = String::new();
        for name in ["output.log", "cache.log", "logs/catalina.out"] {
            let Ok(text) = fs::read_to_string(self.dir.join(name)) else {
                continue;
            };
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            for line in &lines[lines.len().saturating_sub(4)..] {
                out.push_str(&format!("; {name}: {}", line.trim()));
            }
        }
        out
    }

    /// Waits, at most `limit`, until it uses no more CPU (the last load's
    /// connections are done).
    pub fn settle(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut before = procstat::cpu_ticks(self.pid());
        while Instant::now() < deadline {
            thread::sleep(Duration::from_millis(25));
            let now = procstat::cpu_ticks(self.pid());
            if now == before {
                return;
            }
            before = now;
        }
    }

    /// Waits until `ready` succeeds (it is given the time left), at most
    /// `limit`; Err with its last error and the log if it never does.
    pub fn wait_until<T>(
        &mut self,
        limit: Duration,
        mut ready: impl FnMut() -> Result<T, String>,
    ) -> Result<T, String> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(why) = self.exited() {
                return Err(why);
            }
            match ready() {
                Ok(v) => return Ok(v),
                Err(e) if Instant::now() >= deadline || crate::stop::stopping() => {
                    return Err(format!(
                        "not answering after {} s: {e}{}",
                        limit.as_secs(),
                        self.log_tail()
                    ))
                }
                Err(_) => thread::sleep(Duration::from_millis(100)),
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let group = self.child.id() as libc::pid_t;
        // SAFETY: signalling the process group this harness created.
        unsafe { libc::kill(-group, libc::SIGTERM) };
        let deadline = Instant::now() + self.grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
        // Whatever is left of the group (Varnish's cache child, Hitch's
        // workers, a JVM that ignored SIGTERM) goes too.
        // SAFETY: as above; ESRCH when the group is already gone.
        unsafe { libc::kill(-group, libc::SIGKILL) };
        let _ = self.child.kill();
        let _ = self.child.wait();
        reaper::forget(self.child.id());
    }
}

/// A response's status, head and body length.
pub struct Response {
    pub status: u16,
    pub head: String,
    pub body_len: usize,
}

impl Response {
    /// The value of header `name`, if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then_some(v.trim())
        })
    }
}

/// One GET of `path` on its own connection (over TLS with `tls`),
/// `Connection: close`, read to the end (the comparison's own exchange).
pub fn get(addr: SocketAddr, path: &str, tls: Option<&Arc<ClientConfig>>) -> io::Result<Response> {
    let timeout = Duration::from_secs(5);
    let (status, head, body) = crate::servers::exchange(addr, path, tls, timeout, timeout)?;
    Ok(Response {
        status,
        head,
        body_len: body.len(),
    })
}

/// A 200 with the whole body of `size` bytes, or why not.
pub fn get_ok(
    addr: SocketAddr,
    path: &str,
    size: u64,
    tls: Option<&Arc<ClientConfig>>,
) -> Result<Response, String> {
    let r = get(addr, path, tls).map_err(|e| e.to_string())?;
    if r.status != 200 {
        return Err(format!("status {}", r.status));
    }
    if r.body_len as u64 != size {
        return Err(format!("{} body bytes, want {size}", r.body_len));
    }
    Ok(r)
}
