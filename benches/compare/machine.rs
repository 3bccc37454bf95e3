//! What a published table needs to be reproduced: the machine (cores, CPU,
//! kernel, memory), the versions of the load clients, the staticd commit
//! and the command line. The servers' versions are in their descriptions
//! too, and every installed peer's here (whether the run started it or not).

use std::path::Path;
use std::process::{Command, Stdio};

use serde::Serialize;

use crate::servers::version_of;

#[derive(Clone, Debug, Serialize)]
pub struct Host {
    pub cores: usize,
    pub kernel: String,
    pub cpu: String,
    /// MemTotal from /proc/meminfo.
    pub memory_mib: u64,
    /// The kernel's TCP congestion control for new sockets
    /// (net.ipv4.tcp_congestion_control). It changes the large HTTP/2 cells
    /// by half on a VM: BBR paces each socket with a timer of its own
    /// (docs/performance.md, "HTTP/2 at 1 MB and the congestion control").
    pub congestion_control: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct Software {
    /// `git rev-parse --short HEAD` of the tree the bench was built from,
    /// if it is a git checkout and git is installed.
    pub staticd_commit: Option<String>,
    /// Whether tracked files differ from that commit.
    pub staticd_dirty: Option<bool>,
    /// The load clients, each as its version flag prints it (first line).
    pub tools: Vec<ToolVersion>,
    /// The peer servers installed here (nginx ... Caddy, static-web-server),
    /// each as its version flag prints it (first line).
    pub servers: Vec<ToolVersion>,
    /// How the harness was started, as one would type it again.
    pub command_line: String,
}

#[derive(Clone, Debug, Serialize)]
pub struct ToolVersion {
    pub name: String,
    pub version: String,
}

impl Host {
    /// "2 core(s), AMD EPYC 7B13, 7.8 GiB memory, Linux 6.1.0, TCP cubic":
    /// the line a table names its machine with.
    pub fn describe(&self) -> String {
        format!(
            "{} core(s), {}, {:.1} GiB memory, Linux {}, TCP {}",
            self.cores,
            self.cpu,
            self.memory_mib as f64 / 1024.0,
            self.kernel,
            self.congestion_control
        )
    }
}

impl Software {
    /// "commit 60fa8f7", "commit 60fa8f7 with uncommitted changes" or
    /// "(no git commit known)": which staticd a table measured.
    pub fn commit(&self) -> String {
        match (&self.staticd_commit, self.staticd_dirty) {
            (Some(c), Some(true)) => format!("commit {c} with uncommitted changes"),
            (Some(c), _) => format!("commit {c}"),
            (None, _) => "(no git commit known)".into(),
        }
    }
}

pub fn host() -> Host {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
            })
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let memory_mib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("MemTotal:")?
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
        })
        .map_or(0, |kib| kib / 1024);
    let congestion_control = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
        .map_or_else(|_| "unknown".into(), |s| s.trim().to_string());
    Host {
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        kernel,
        cpu,
        memory_mib,
        congestion_control,
    }
}

/// `args`: the harness's arguments (after the program name).
pub fn software(args: &[String]) -> Software {
    let mut tools: Vec<ToolVersion> = [("wrk", "-v"), ("ab", "-V"), ("h2load", "--version")]
        .into_iter()
        .filter(|(name, _)| crate::load::available(name))
        .map(|(name, flag)| ToolVersion {
            name: name.into(),
            version: version_of(Path::new(name), flag),
        })
        .collect();
    // The HTTP/3 load client, wherever it was found (load::oha_path).
    if let (Some(path), Some(version)) = (crate::load::oha_path(), crate::load::oha_version()) {
        tools.push(ToolVersion {
            name: "oha".into(),
            version: format!("{version} ({}, --features http3)", path.display()),
        });
    }
    let dir = env!("CARGO_MANIFEST_DIR");
    let staticd_commit = git(dir, &["rev-parse", "--short", "HEAD"]);
    let staticd_dirty = staticd_commit
        .as_ref()
        .and_then(|_| git(dir, &["status", "--porcelain", "--untracked-files=no"]))
        .map(|changes| !changes.is_empty());
    Software {
        staticd_commit,
        staticd_dirty,
        tools,
        servers: crate::servers::peer_versions()
            .into_iter()
            .map(|(name, version)| ToolVersion {
                name: name.into(),
                version,
            })
            .collect(),
        command_line: command_line(args),
    }
}

/// The output of `git -C dir ARGS`, trimmed; None if it cannot run or fails.
fn git(dir: &str, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// "cargo bench --bench compare --features uring -- --quick": the
/// arguments Cargo adds (`--bench`) left out, the features compiled in
/// put back.
fn command_line(args: &[String]) -> String {
    let mut line = String::from("cargo bench --bench compare");
    if cfg!(feature = "uring") {
        line.push_str(" --features uring");
    }
    let given: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| *a != "--bench")
        .collect();
    if !given.is_empty() {
        line.push_str(" --");
        for a in given {
            line.push(' ');
            if a.is_empty()
                || a.contains(|c: char| !(c.is_ascii_alphanumeric() || "-_=,./:".contains(c)))
            {
                line.push_str(&format!("'{}'", a.replace('\'', "'\\''")));
            } else {
                line.push_str(a);
            }
        }
    }
    line
}

/// The cores the load clients and the servers share.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// 10,000 connections need more descriptors than the usual soft limit;
/// the servers and clients inherit the raised limit. The hard limit is
/// raised too where the harness may (root with CAP_SYS_RESOURCE, up to
/// fs.nr_open); otherwise the soft limit goes up to the hard one. Returns
/// the limit in force.
pub fn raise_fd_limit() -> u64 {
    const WANT: u64 = 1_048_576;
    let nr_open = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(WANT);
    // SAFETY: getrlimit/setrlimit on a struct we own.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 1024;
        }
        let target = WANT.min(nr_open) as libc::rlim_t;
        if lim.rlim_max < target {
            let raised = libc::rlimit {
                rlim_cur: target,
                rlim_max: target,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return target as u64;
            }
        }
        if lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur as u64
    }
}
