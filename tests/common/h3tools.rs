//! The outside HTTP/3 clients the HTTP/3 suites drive: aioquic (through
//! tests/tools/h3.py), ngtcp2's example client (Debian's ngtcp2-client:
//! `gtlsclient`) and Chromium. Each is looked for once per test; a missing
//! one is a `skip` (a failure under `.ci/run`).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::common::{run_bounded, skip, tool, Run};

/// Bound for one run of an outside client.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

/// `python3` with aioquic importable, and tests/tools/h3.py; or None after `skip`.
pub fn aioquic() -> Option<(PathBuf, PathBuf)> {
    let python = tool("python3", "python3")?;
    let has = Command::new(&python)
        .args(["-c", "import aioquic"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has {
        skip("python3 has no aioquic module (pip install aioquic); .ci/run installs it");
        return None;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/tools/h3.py");
    Some((python, script))
}

/// Runs tests/tools/h3.py with `args`; its JSON output parsed.
pub fn h3py(aioquic: &(PathBuf, PathBuf), args: &[&str]) -> (serde_json::Value, Run) {
    let mut cmd = Command::new(&aioquic.0);
    cmd.arg(&aioquic.1).args(args);
    let run = run_bounded(&mut cmd, b"", CLIENT_TIMEOUT);
    run.assert_success("tests/tools/h3.py");
    let json = serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("{}", run.describe(&format!("h3.py's output: {e}"))));
    (json, run)
}
