//! Nothing the harness starts may outlive it, even when it is killed with
//! SIGKILL and no destructor runs.
//!
//! A direct child is covered by PR_SET_PDEATHSIG. A server's own workers
//! (nginx's, lighttpd's, apache's, tcpserver's children) are not: for those
//! a small watcher process (this binary again, with `--reap-groups`) is told
//! each server's process group on a pipe, and kills every group still
//! listed once the pipe closes, which happens when the harness is gone,
//! however it went. It then removes the temporary directory, which the
//! harness removes itself on any other exit.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::Mutex;

/// The hidden command-line flag that runs the watcher instead of the harness.
pub const FLAG: &str = "--reap-groups";

static PIPE: Mutex<Option<ChildStdin>> = Mutex::new(None);

/// Makes `cmd`'s process get SIGKILL when the harness dies.
pub fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl only sets a flag on the new process; nothing is
    // allocated between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// Starts the watcher. Without it (if it cannot start) the harness still
/// stops every server on any ordinary exit, panic or signal.
pub fn start(harness: &std::path::Path) -> Result<(), String> {
    let mut child = Command::new(harness)
        .arg(FLAG)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own group: a Ctrl-C in the terminal must not end it first.
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start the process watcher: {e}"))?;
    let pipe = child.stdin.take();
    *PIPE.lock().unwrap_or_else(|e| e.into_inner()) = pipe;
    Ok(())
}

fn send(line: &str) {
    let mut guard = PIPE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(pipe) = guard.as_mut() {
        let _ = writeln!(pipe, "{line}");
    }
}

/// The group is to be killed if the harness dies.
pub fn watch(group: u32) {
    send(&format!("+{group}"));
}

/// The group is gone (its server was stopped): forget it.
pub fn forget(group: u32) {
    send(&format!("-{group}"));
}

/// Remove this directory if the harness dies without doing so.
pub fn remove_later(dir: &std::path::Path) {
    send(&format!("d{}", dir.display()));
}

/// The watcher's main: read `+PGID`, `-PGID` and `dPATH` lines until EOF,
/// then kill every group still listed and remove the directory.
pub fn main() -> ! {
    let mut groups = BTreeSet::new();
    let mut dir = None;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if let Some(path) = line.strip_prefix('d') {
            dir = Some(std::path::PathBuf::from(path));
            continue;
        }
        let (sign, pgid) = line.split_at(line.len().min(1));
        let Ok(pgid) = pgid.parse::<i32>() else {
            continue;
        };
        if pgid <= 1 {
            continue;
        }
        match sign {
            "+" => groups.insert(pgid),
            "-" => groups.remove(&pgid),
            _ => false,
        };
    }
    for pgid in groups {
        // SAFETY: kill(2) on a process group the harness created.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
    if let Some(dir) = dir.filter(|d| d.exists()) {
        // Give the killed servers a moment to let go of their files.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let _ = std::fs::remove_dir_all(dir);
    }
    std::process::exit(0)
}
