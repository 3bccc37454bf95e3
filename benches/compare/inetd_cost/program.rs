//! The programs --inetd-cost measures: where each is (eris, staticd's
//! two builds, /bin/true), how one connection starts it, the check that
//! it answers the request, and what one start costs (wait4(2)'s rusage).

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};

use serde::Serialize;

use super::{Ground, SIZE};
use crate::procstat;
use crate::report::{self, Spread};
use crate::servers::{self, Kind, Server};
use crate::startup;

/// One column: a program started once per connection.
pub struct Program {
    /// The column's name.
    pub name: String,
    pub path: PathBuf,
    /// Its arguments for one connection on stdin and stdout.
    pub args: Vec<OsString>,
    /// Where it runs: eris serves the files below its current directory.
    pub cwd: PathBuf,
    /// What tcpserver runs it as (None: /bin/true, which serves nothing).
    pub kind: Option<Kind>,
    /// Its server under tcpserver, once started (Err: why not).
    pub server: Result<Server, String>,
    pub record: Column,
}

/// A program's figures, for inetd-cost.json.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Column {
    pub name: String,
    pub path: String,
    pub version: String,
    /// How one start is run (the fork+exec loop).
    pub command: String,
    /// Whether it serves the file (not /bin/true): it has a requests/s row.
    pub serves: bool,
    /// How tcpserver ran it.
    pub tcpserver: Option<String>,
    pub rounds: Vec<Round>,
    pub cpu_us_per_start: Option<Spread>,
    pub faults_per_start: Option<Spread>,
    pub requests_per_second: Option<Spread>,
    /// What failed, and in which round.
    pub errors: Vec<String>,
}

/// One round of one program.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Round {
    pub round: u32,
    /// The children's user+sys time over the loop's runs.
    pub cpu_us_per_start: Option<f64>,
    /// Their minor + major page faults over the runs.
    pub faults_per_start: Option<f64>,
    pub requests_per_second: Option<f64>,
    /// ab's failed and non-2xx responses.
    pub ab_errors: u64,
}

/// The columns whose program is there, each checked to answer the request
/// with the file; a skip line for each that is not.
pub fn programs(
    minimal: Option<&Path>,
    also: &[(String, PathBuf)],
    g: &Ground,
    skipped: &mut Vec<String>,
) -> Result<Vec<Program>, String> {
    let body = std::fs::read(g.docroot.file(SIZE)).map_err(|e| e.to_string())?;
    let mut programs = Vec::new();
    for (name, path, kind) in candidates(minimal, also, g) {
        let checked = path.and_then(|path| {
            let p = Program::new(name.clone(), path, kind, g);
            // /bin/true answers nothing.
            if kind.is_some() {
                check(&p, &g.request, &body)
                    .map_err(|why| format!("does not answer the request: {why}"))?;
            }
            Ok(p)
        });
        match checked {
            Ok(p) => programs.push(p),
            Err(why) => {
                let line = format!("skipped: {name}: {why}");
                println!("{line}");
                skipped.push(line);
            }
        }
    }
    if programs.is_empty() {
        return Err("nothing to measure".into());
    }
    Ok(programs)
}

/// The columns in order (the four, then `--inetd-also`'s builds before
/// /bin/true): a name, the program's path (or why there is none) and what
/// tcpserver runs it as. staticd's builds are copied into the scratch
/// directory, so that a rebuild cannot replace them mid-run.
fn candidates(
    minimal: Option<&Path>,
    also: &[(String, PathBuf)],
    g: &Ground,
) -> Vec<(String, Result<PathBuf, String>, Option<Kind>)> {
    let built = PathBuf::from(env!("CARGO_BIN_EXE_staticd"));
    let mut columns = vec![
        (
            "eris".to_string(),
            servers::eris_path().ok_or_else(|| Kind::Eris.missing().unwrap_or_default()),
            Some(Kind::Eris),
        ),
        (
            "staticd --inetd".to_string(),
            g.docroot.keep_copy(&built, "staticd"),
            Some(Kind::StaticdInetd),
        ),
        (
            "staticd --no-default-features --inetd".to_string(),
            minimal_build(minimal).and_then(|p| g.docroot.keep_copy(&p, "staticd-minimal")),
            Some(Kind::StaticdInetd),
        ),
    ];
    for (i, (name, path)) in also.iter().enumerate() {
        columns.push((
            format!("staticd {name} --inetd"),
            g.docroot.keep_copy(path, &format!("staticd-also-{i}")),
            Some(Kind::StaticdInetd),
        ));
    }
    columns.push((
        "/bin/true".to_string(),
        Ok(PathBuf::from("/bin/true")),
        None,
    ));
    columns
}

impl Program {
    /// `path` run as one connection's server: staticd with the flags the
    /// comparison gives staticd-inetd, eris in its virtual hosts'
    /// directory, /bin/true as it is.
    fn new(name: String, path: PathBuf, kind: Option<Kind>, g: &Ground) -> Program {
        let (args, cwd, version): (Vec<OsString>, PathBuf, String) = match kind {
            Some(Kind::StaticdInetd) => (
                vec![
                    "--inetd".into(),
                    "--root".into(),
                    g.docroot.root().into(),
                    "--log-format".into(),
                    "off".into(),
                ],
                g.docroot.scratch().to_path_buf(),
                servers::version_of(&path, "--version"),
            ),
            Some(_) => (Vec::new(), g.docroot.vhosts(), servers::eris_version(&path)),
            None => (
                Vec::new(),
                g.docroot.scratch().to_path_buf(),
                "coreutils".into(),
            ),
        };
        let mut p = Program {
            name: name.clone(),
            path,
            args,
            cwd,
            kind,
            server: Err("not started".into()),
            record: Column {
                name,
                version,
                serves: kind.is_some(),
                ..Column::default()
            },
        };
        p.record.path = p.path.display().to_string();
        p.record.command = format!(
            "cd {} && {} < request",
            p.cwd.display(),
            servers::describe_command(&command(&p))
        );
        p
    }
}

/// The --no-default-features staticd: the one given, or cargo's build of
/// it into <target>/inetd-minimal (as CI builds it for its size check;
/// a no-op when it is up to date).
fn minimal_build(given: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(path) = given {
        return if path.is_file() {
            Ok(path.to_path_buf())
        } else {
            Err(format!("--inetd-minimal {}: no such file", path.display()))
        };
    }
    let target = report::target_dir().join("inetd-minimal");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    println!(
        "compare --inetd-cost: cargo build --release --no-default-features --target-dir {} (minutes the first time)",
        target.display()
    );
    let status = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--no-default-features",
            "--bin",
            "staticd",
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target)
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build --no-default-features: {status}"));
    }
    Ok(target.join("release").join("staticd"))
}

/// One start with stdout captured: the response must be a 200 whose body
/// is the file.
fn check(p: &Program, request: &Path, body: &[u8]) -> Result<(), String> {
    let stdin = File::open(request).map_err(|e| e.to_string())?;
    let mut child = command(p)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", p.path.display()))?;
    let mut out = Vec::new();
    let read = child.stdout.take().map(|mut s| s.read_to_end(&mut out));
    let status = child.wait().map_err(|e| e.to_string())?;
    if let Some(Err(e)) = read {
        return Err(e.to_string());
    }
    if !status.success() {
        return Err(format!("exited with {status}"));
    }
    let end = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no response head")?;
    if !out.starts_with(b"HTTP/1.1 200") || &out[end + 4..] != body {
        return Err(format!(
            "unexpected response: {:?}, {} body bytes",
            String::from_utf8_lossy(&out[..end.min(40)]),
            out.len() - end - 4
        ));
    }
    Ok(())
}

/// The program as one connection starts it, its stderr thrown away (eris
/// logs a line per request there, and staticd's log is off).
fn command(p: &Program) -> Command {
    let mut c = Command::new(&p.path);
    c.args(&p.args).current_dir(&p.cwd).stderr(Stdio::null());
    c
}

/// The fork+exec loop: `runs` starts (after startup.rs's unmeasured
/// ones), each reaped by wait4(2); the children's CPU time in us and page
/// faults, each over the runs.
pub fn per_start(p: &Program, request: &Path, runs: u32) -> Result<(f64, f64), String> {
    let (usages, error) = startup::repeat_values(runs, || start_once(p, request));
    if let Some(e) = error {
        return Err(e);
    }
    let n = usages.len().max(1) as f64;
    let cpu: f64 = usages.iter().map(|u| u.0).sum();
    let faults: f64 = usages.iter().map(|u| u.1).sum();
    Ok((cpu / n, faults / n))
}

/// One start on a fresh stdin holding the request, stdout to /dev/null:
/// the child's user+sys time (us) and page faults (minor + major), from
/// the rusage wait4(2) gives for it alone.
fn start_once(p: &Program, request: &Path) -> io::Result<(f64, f64)> {
    let stdin = File::open(request)?;
    let child = command(p).stdin(stdin).stdout(Stdio::null()).spawn()?;
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: wait4 on our own child, which std has not reaped (its Child
    // is never waited on), into a zeroed rusage.
    let (reaped, usage) = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        (libc::wait4(pid, &mut status, 0, &mut usage), usage)
    };
    if reaped != pid {
        return Err(io::Error::last_os_error());
    }
    let status = ExitStatus::from_raw(status);
    if !status.success() {
        return Err(io::Error::other(format!("{}: {status}", p.name)));
    }
    Ok((
        procstat::cpu_seconds(&usage) * 1e6,
        (usage.ru_minflt + usage.ru_majflt) as f64,
    ))
}

/// The medians and ranges of a column's rounds.
pub fn summarize(mut c: Column) -> Column {
    c.cpu_us_per_start = Spread::of(c.rounds.iter().filter_map(|r| r.cpu_us_per_start));
    c.faults_per_start = Spread::of(c.rounds.iter().filter_map(|r| r.faults_per_start));
    c.requests_per_second = Spread::of(c.rounds.iter().filter_map(|r| r.requests_per_second));
    c
}
