//! `--user`, `--group` and `--chroot`: giving up root after binding. Every test runs in
//! both modes.
//!
//! Switching user and chroot(2) need root. CI runs the tests as root; run as anyone else,
//! each test checks the documented start-up failure instead (exit 1, one stderr line), so
//! nothing is skipped silently.

#[macro_use]
mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use common::*;

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    root
}

/// `nobody`'s uid and primary gid from /etc/passwd.
fn nobody() -> (u32, u32) {
    let passwd = fs::read_to_string("/etc/passwd").expect("read /etc/passwd");
    let line = passwd
        .lines()
        .find(|l| l.starts_with("nobody:"))
        .expect("a `nobody` user in /etc/passwd");
    let fields: Vec<&str> = line.split(':').collect();
    (fields[2].parse().unwrap(), fields[3].parse().unwrap())
}

/// Pids of running `staticd` processes whose command line has `needle` as an argument
/// (a temp dir path unique to the test).
fn staticd_pids_with_arg(needle: &Path) -> Vec<u32> {
    let needle = needle.as_os_str().as_encoded_bytes();
    let mut pids = Vec::new();
    for entry in fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        if args[0] == staticd_bin().as_bytes() && args.contains(&needle) {
            pids.push(pid);
        }
    }
    pids
}

/// The one staticd process serving `server` (for inetd: the one serving the open
/// connection `conn`, which has already been answered once).
fn the_staticd_pid(needle: &Path) -> u32 {
    let pids = staticd_pids_with_arg(needle);
    assert_eq!(
        pids.len(),
        1,
        "expected one staticd process with {needle:?}: {pids:?}"
    );
    pids[0]
}

/// The numbers of a `Uid:` or `Gid:` line of /proc/PID/status: real, effective, saved,
/// file system.
fn ids(pid: u32, field: &str) -> Vec<u32> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    line[field.len()..]
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect()
}

/// Opens a connection, checks that `/a.txt` is served, and returns the connection
/// (kept open so that an inetd process is still alive).
fn serve_a_txt(server: &Server) -> Conn {
    let mut conn = server.connect();
    let resp = conn.roundtrip(request("GET", "/a.txt", &[]));
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.body_str(), "alpha\n");
    conn
}

/// `staticd --root ROOT ARGS` (standalone on an ephemeral loopback port, or `--inetd`)
/// run to its exit.
fn run_failing(v: Variant, root: &Path, args: &[&str]) -> Outcome {
    let mut all: Vec<String> = vec!["--root".into(), root.to_str().unwrap().into()];
    match v.mode {
        Mode::Standalone => all.extend(["--port", "0", "--bind", "127.0.0.1"].map(String::from)),
        Mode::Inetd => all.push("--inetd".into()),
    }
    all.extend(args.iter().map(|a| a.to_string()));
    run_to_exit(&all)
}

fn user_nobody_runs_with_nobodys_ids(v: Variant) {
    let root = site();
    if !is_root() {
        let outcome = run_failing(v, root.path(), &["--user", "nobody"]);
        assert_startup_failure(&outcome, 1, &["nobody"]);
        return;
    }
    let (uid, gid) = nobody();
    let server = Server::builder(v, root.path())
        .args(["--user", "nobody"])
        .start();
    let _conn = serve_a_txt(&server);
    let pid = the_staticd_pid(root.path());
    assert_eq!(ids(pid, "Uid:"), [uid; 4], "real, effective, saved, fs uid");
    assert_eq!(ids(pid, "Gid:"), [gid; 4], "real, effective, saved, fs gid");
    assert_eq!(ids(pid, "Groups:"), [gid], "supplementary groups");
}

fn numeric_user_and_group_are_used(v: Variant) {
    let root = site();
    if !is_root() {
        let outcome = run_failing(v, root.path(), &["--user", "65534", "--group", "65533"]);
        assert_startup_failure(&outcome, 1, &["65534"]);
        return;
    }
    let server = Server::builder(v, root.path())
        .args(["--user", "65534", "--group", "65533"])
        .start();
    let _conn = serve_a_txt(&server);
    let pid = the_staticd_pid(root.path());
    assert_eq!(ids(pid, "Uid:"), [65534; 4]);
    assert_eq!(ids(pid, "Gid:"), [65533; 4]);
}

fn unknown_user_exits_1_naming_the_user(v: Variant) {
    let root = site();
    let outcome = run_failing(v, root.path(), &["--user", "staticd-no-such-user"]);
    assert_startup_failure(&outcome, 1, &["user staticd-no-such-user: no such user"]);
}

fn unknown_group_exits_1_naming_the_group(v: Variant) {
    let root = site();
    let outcome = run_failing(
        v,
        root.path(),
        &["--user", "nobody", "--group", "staticd-no-such-group"],
    );
    assert_startup_failure(&outcome, 1, &["staticd-no-such-group"]);
}

fn group_without_user_is_a_usage_error(v: Variant) {
    let root = site();
    let outcome = run_failing(v, root.path(), &["--group", "nogroup"]);
    assert_usage_error(&outcome, &["--user"]);
}

/// `JAIL/site/a.txt` inside a temp dir that also holds `secret.txt` outside the jail.
struct Jail {
    outer: tempfile::TempDir,
}

impl Jail {
    fn new() -> Jail {
        let outer = tempfile::tempdir().unwrap();
        let jail = outer.path().join("jail");
        fs::create_dir_all(jail.join("site")).unwrap();
        for dir in [outer.path(), jail.as_path(), jail.join("site").as_path()] {
            fs::set_permissions(dir, fs::Permissions::from_mode(0o755)).unwrap();
        }
        fs::write(jail.join("site/a.txt"), "alpha\n").unwrap();
        fs::write(outer.path().join("secret.txt"), "OUTSIDE-THE-JAIL\n").unwrap();
        // A relative link that reaches the secret when not chrooted. (An absolute link
        // would be a redirecting symlink, answered with a 301.)
        std::os::unix::fs::symlink("../../secret.txt", jail.join("site/rel")).unwrap();
        Jail { outer }
    }

    fn path(&self) -> PathBuf {
        self.outer.path().join("jail")
    }
}

fn chroot_serves_the_root_inside_it(v: Variant) {
    let jail = Jail::new();
    let dir = jail.path();
    let args = ["--chroot", dir.to_str().unwrap()];
    if !is_root() {
        let outcome = run_failing(v, Path::new("/site"), &args);
        assert_startup_failure(&outcome, 1, &["chroot"]);
        return;
    }
    let server = Server::builder(v, Path::new("/site")).args(args).start();
    let _conn = serve_a_txt(&server);
    let pid = the_staticd_pid(&dir);
    let seen_root = fs::read_link(format!("/proc/{pid}/root")).unwrap();
    assert_eq!(seen_root, fs::canonicalize(&dir).unwrap(), "process root");
}

fn chroot_cannot_reach_files_outside(v: Variant) {
    let jail = Jail::new();
    let dir = jail.path();
    let args = ["--chroot", dir.to_str().unwrap()];
    if !is_root() {
        let outcome = run_failing(v, Path::new("/site"), &args);
        assert_startup_failure(&outcome, 1, &["chroot"]);
        return;
    }
    let server = Server::builder(v, Path::new("/site")).args(args).start();
    for target in ["/rel", "/../secret.txt", "/%2e%2e/%2e%2e/secret.txt"] {
        let resp = server.connect().roundtrip(request("GET", target, &[]));
        assert!(
            resp.status == 404 || resp.status == 400,
            "GET {target}: {resp:#?}"
        );
        assert!(
            !resp.body_str().contains("OUTSIDE-THE-JAIL"),
            "GET {target}"
        );
    }
}

fn chroot_and_user_together(v: Variant) {
    let jail = Jail::new();
    let dir = jail.path();
    let args = ["--chroot", dir.to_str().unwrap(), "--user", "nobody"];
    if !is_root() {
        let outcome = run_failing(v, Path::new("/site"), &args);
        assert_eq!(outcome.status.code(), Some(1), "{outcome:#?}");
        return;
    }
    let (uid, _) = nobody();
    let server = Server::builder(v, Path::new("/site")).args(args).start();
    let _conn = serve_a_txt(&server);
    let pid = the_staticd_pid(&dir);
    assert_eq!(ids(pid, "Uid:"), [uid; 4]);
    let seen_root = fs::read_link(format!("/proc/{pid}/root")).unwrap();
    assert_eq!(seen_root, fs::canonicalize(&dir).unwrap(), "process root");
}

matrix!([h1, tls] both_modes:
    user_nobody_runs_with_nobodys_ids,
    numeric_user_and_group_are_used,
    unknown_user_exits_1_naming_the_user,
    unknown_group_exits_1_naming_the_group,
    group_without_user_is_a_usage_error,
    chroot_serves_the_root_inside_it,
    chroot_cannot_reach_files_outside,
    chroot_and_user_together,
);
