//! Outside programs some tests drive (curl, tcpserver, busybox tcpsvd,
//! slowhttptest). On a machine without them such a test is skipped, saying
//! so in one line on stderr; `.ci/run` installs them all and sets
//! `STATICD_TEST_REQUIRE_TOOLS=1`, which turns every skip into a failure, so
//! CI proves every test ran.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

/// Set (to anything but `0` or empty) by `.ci/run`: a missing tool fails the test.
const REQUIRE_TOOLS: &str = "STATICD_TEST_REQUIRE_TOOLS";

/// `program` on PATH, or None after `skip` (Debian's `package` provides it).
pub fn tool(program: &str, package: &str) -> Option<PathBuf> {
    let found = find_on_path(program);
    if found.is_none() {
        skip(&format!(
            "`{program}` not found on PATH (Debian package {package}); .ci/run installs it"
        ));
    }
    found
}

/// busybox, if it has the tcpsvd applet (Debian builds it without), or None
/// after `skip`.
pub fn busybox_with_tcpsvd() -> Option<PathBuf> {
    let busybox = tool("busybox", "busybox")?;
    let applets = Command::new(&busybox)
        .arg("--list")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default();
    if applets.lines().any(|a| a == "tcpsvd") {
        return Some(busybox);
    }
    skip(&format!(
        "{} has no tcpsvd applet (Debian's busybox is built without it); \
         .ci/run builds one that has it",
        busybox.display()
    ));
    None
}

/// Skips the running test, or fails it when `STATICD_TEST_REQUIRE_TOOLS` is set.
pub fn skip(why: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    if tools_required() {
        panic!("{test}: {why} ({REQUIRE_TOOLS} is set, so this test may not be skipped)");
    }
    // Straight to the process's stderr: the test harness captures what
    // `eprintln!` prints and shows it only for failing tests, and a skip
    // must be seen.
    let line = format!("skipped: {test}: {why}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

fn tools_required() -> bool {
    std::env::var_os(REQUIRE_TOOLS).is_some_and(|v| !v.is_empty() && v != "0")
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}
