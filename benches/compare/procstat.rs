//! What a server costs, read from /proc: memory (VmRSS) and CPU time
//! (utime + stime) summed over its whole process tree; and the kernel's
//! UDP error counters (what `nstat` shows), for the HTTP/3 cells.

use std::collections::HashMap;
use std::fs;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use serde::Serialize;

/// Clock ticks per second, for the times in /proc/<pid>/stat.
pub fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Fields of /proc/<pid>/stat after the command name (which may hold
/// spaces and parentheses, so it is skipped up to the last ')').
fn stat_fields(pid: i32) -> Option<Vec<u64>> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    // rest starts with " state ppid ..."; map the state letter to 0.
    Some(
        rest.split_whitespace()
            .map(|f| f.parse::<i64>().map_or(0, |v| v.max(0) as u64))
            .collect(),
    )
}

/// `root` and every live descendant.
pub fn tree(root: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    if let Ok(entries) = fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            // Field index 1 (after the state) is the parent pid.
            if let Some(ppid) = stat_fields(pid).and_then(|f| f.get(1).copied()) {
                children.entry(ppid as i32).or_default().push(pid);
            }
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        if let Some(kids) = children.get(&out[i]) {
            out.extend(kids);
        }
        i += 1;
    }
    out
}

/// CPU ticks used by the tree so far: each live process's own utime and
/// stime plus cutime and cstime, the time of the children it has reaped
/// (tcpserver's per-connection staticd processes end up there).
pub fn cpu_ticks(root: i32) -> u64 {
    tree(root)
        .into_iter()
        .filter_map(stat_fields)
        // After the command: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14).
        .map(|f| f.get(11..15).map_or(0, |t| t.iter().sum::<u64>()))
        .sum()
}

/// A "Name:  N kB" field of a /proc/<pid>/ file, summed over the tree.
fn sum_kib(root: i32, file: &str, field: &str) -> u64 {
    tree(root)
        .into_iter()
        .filter_map(|pid| fs::read_to_string(format!("/proc/{pid}/{file}")).ok())
        .filter_map(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .sum()
}

/// Resident memory of the tree in KiB: VmRSS summed (pages shared between
/// a server's processes count once per process).
pub fn rss_kib(root: i32) -> u64 {
    sum_kib(root, "status", "VmRSS:")
}

/// Proportional set size of the tree in KiB: Pss from
/// /proc/<pid>/smaps_rollup summed, each shared page divided among the
/// processes that map it (so a page shared by 1,000 processes counts once
/// in the sum, not 1,000 times as in VmRSS).
pub fn pss_kib(root: i32) -> u64 {
    sum_kib(root, "smaps_rollup", "Pss:")
}

/// Samples a tree's RSS in the background; `finish` returns the largest.
pub struct RssSampler {
    stop: mpsc::Sender<()>,
    handle: JoinHandle<u64>,
}

impl RssSampler {
    pub fn start(root: i32, every: Duration) -> RssSampler {
        let (stop, stopped) = mpsc::channel();
        let handle = thread::spawn(move || {
            let mut max = 0;
            // The first sample waits until connections are up.
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                max = max.max(rss_kib(root));
            }
            if max == 0 {
                max = rss_kib(root);
            }
            max
        });
        RssSampler { stop, handle }
    }

    pub fn finish(self) -> u64 {
        let _ = self.stop.send(());
        self.handle.join().unwrap_or(0)
    }
}

/// CPU seconds used by this process's reaped children (the load clients).
pub fn children_cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut u);
        u
    };
    cpu_seconds(&usage)
}

/// The user + system CPU time a rusage(2) record holds, in seconds.
pub fn cpu_seconds(usage: &libc::rusage) -> f64 {
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// The kernel's UDP error counters, system-wide (/proc/net/snmp's `Udp:`
/// lines and /proc/net/snmp6's `Udp6*`, the counters `nstat -az` names
/// UdpInErrors, UdpRcvbufErrors, UdpSndbufErrors and Udp6...): datagrams
/// dropped because a socket's buffer was full, either way. Read before
/// and after an HTTP/3 cell, their difference is what the cell (and
/// anything else on the machine meanwhile) lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct UdpCounters {
    pub in_errors: u64,
    pub rcvbuf_errors: u64,
    pub sndbuf_errors: u64,
    pub in6_errors: u64,
    pub rcvbuf6_errors: u64,
    pub sndbuf6_errors: u64,
}

impl UdpCounters {
    /// Now, or None if /proc/net/snmp cannot be read.
    pub fn read() -> Option<UdpCounters> {
        let snmp = fs::read_to_string("/proc/net/snmp").ok()?;
        let snmp6 = fs::read_to_string("/proc/net/snmp6").unwrap_or_default();
        UdpCounters::parse(&snmp, &snmp6)
    }

    /// From the texts of /proc/net/snmp (a `Udp:` line of names, then one
    /// of values) and /proc/net/snmp6 (a name and a value a line).
    pub fn parse(snmp: &str, snmp6: &str) -> Option<UdpCounters> {
        let mut lines = snmp.lines().filter(|l| l.starts_with("Udp:"));
        let names: Vec<&str> = lines.next()?.split_whitespace().skip(1).collect();
        let values: Vec<u64> = lines
            .next()?
            .split_whitespace()
            .skip(1)
            .map(|v| v.parse().unwrap_or(0))
            .collect();
        let v4 = |name: &str| {
            names
                .iter()
                .position(|n| *n == name)
                .and_then(|i| values.get(i).copied())
                .unwrap_or(0)
        };
        let v6 = |name: &str| {
            snmp6
                .lines()
                .find_map(|l| {
                    let mut words = l.split_whitespace();
                    (words.next()? == name).then(|| words.next()?.parse().ok())?
                })
                .unwrap_or(0)
        };
        Some(UdpCounters {
            in_errors: v4("InErrors"),
            rcvbuf_errors: v4("RcvbufErrors"),
            sndbuf_errors: v4("SndbufErrors"),
            in6_errors: v6("Udp6InErrors"),
            rcvbuf6_errors: v6("Udp6RcvbufErrors"),
            sndbuf6_errors: v6("Udp6SndbufErrors"),
        })
    }

    /// What rose from `before` to `self`.
    pub fn since(&self, before: &UdpCounters) -> UdpCounters {
        UdpCounters {
            in_errors: self.in_errors.saturating_sub(before.in_errors),
            rcvbuf_errors: self.rcvbuf_errors.saturating_sub(before.rcvbuf_errors),
            sndbuf_errors: self.sndbuf_errors.saturating_sub(before.sndbuf_errors),
            in6_errors: self.in6_errors.saturating_sub(before.in6_errors),
            rcvbuf6_errors: self.rcvbuf6_errors.saturating_sub(before.rcvbuf6_errors),
            sndbuf6_errors: self.sndbuf6_errors.saturating_sub(before.sndbuf6_errors),
        }
    }

    pub fn add(&mut self, o: &UdpCounters) {
        self.in_errors += o.in_errors;
        self.rcvbuf_errors += o.rcvbuf_errors;
        self.sndbuf_errors += o.sndbuf_errors;
        self.in6_errors += o.in6_errors;
        self.rcvbuf6_errors += o.rcvbuf6_errors;
        self.sndbuf6_errors += o.sndbuf6_errors;
    }

    /// "UdpInErrors 0, UdpRcvbufErrors 0, UdpSndbufErrors 0; Udp6 0/0/0".
    pub fn describe(&self) -> String {
        format!(
            "UdpInErrors {}, UdpRcvbufErrors {}, UdpSndbufErrors {}; Udp6InErrors {}, Udp6RcvbufErrors {}, Udp6SndbufErrors {}",
            self.in_errors,
            self.rcvbuf_errors,
            self.sndbuf_errors,
            self.in6_errors,
            self.rcvbuf6_errors,
            self.sndbuf6_errors
        )
    }
}
