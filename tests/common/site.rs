//! Site files read by the server at run time (`_headers`, `_redirects`, htpasswd):
//! editing them as a person would, waiting for the server to pick the change up, and
//! the load-time messages about their lines.

use super::*;

/// How long a test waits for an edited site file to take effect at all.
pub const RELOAD_LIMIT: Duration = Duration::from_secs(5);

/// When an edit must have taken effect everywhere: the server applies a change within
/// about 2 s. Each thread of a standalone server keeps its own copy of the rules and
/// looks at the file at most once a second, so until then one connection may see the
/// edit and the next not yet.
pub const RELOAD_SETTLED: Duration = Duration::from_secs(2);

/// Rewrites `path` in place with `contents`, as an editor saving it would: the mtime
/// becomes now (a file made by [`Docroot::file`] has a 1994 one), and the size changes
/// with the contents. Returns when the edit began.
pub fn edit(path: &Path, contents: &str) -> Instant {
    let began = Instant::now();
    fs::write(path, contents).unwrap();
    set_mtime(path, SystemTime::now());
    began
}

/// After an edit at `edited`: waits (up to [`RELOAD_LIMIT`]) until `applied` says the
/// change took effect, then checks that it holds on several more connections once
/// [`RELOAD_SETTLED`] has passed since the edit. `applied` makes its requests on fresh
/// connections (new processes in inetd mode) and says what it saw when it fails.
pub fn assert_reloaded(edited: Instant, mut applied: impl FnMut() -> Result<(), String>) {
    let mut last = String::new();
    let seen = eventually(RELOAD_LIMIT, || match applied() {
        Ok(()) => Some(()),
        Err(saw) => {
            last = saw;
            None
        }
    });
    assert!(
        seen.is_some(),
        "the edit did not take effect within {RELOAD_LIMIT:?}: {last}"
    );
    let settled = edited + RELOAD_SETTLED;
    thread::sleep(settled.saturating_duration_since(Instant::now()));
    for _ in 0..4 {
        if let Err(saw) = applied() {
            panic!("{RELOAD_SETTLED:?} after the edit a connection still did not see it: {saw}");
        }
    }
}

/// Calls `probe` every 100 ms until it returns `Some`, for up to `limit`; None if it
/// never did.
pub fn eventually<T>(limit: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(found) = probe() {
            return Some(found);
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// The prefix of a message about line `line` of `file`: `staticd: FILE:LINE: `.
pub fn file_line_prefix(file: &Path, line: usize) -> String {
    format!("staticd: {}:{line}: ", file.display())
}

/// Waits for the stderr message about line `line` of `file` (`staticd: FILE:LINE:
/// MESSAGE`) and returns it. In inetd mode a file is read by each connection's process,
/// so a request must have been made first.
pub fn wait_file_line_message(stderr: &Lines, file: &Path, line: usize) -> String {
    let prefix = file_line_prefix(file, line);
    let found = stderr.wait_for(IO_TIMEOUT, |lines| {
        lines.iter().any(|l| l.starts_with(&prefix))
    });
    match found {
        Some(lines) => lines.into_iter().find(|l| l.starts_with(&prefix)).unwrap(),
        None => panic!(
            "no `{prefix}...` message within {IO_TIMEOUT:?}; stderr: {:#?}",
            stderr.snapshot()
        ),
    }
}

/// The stderr lines that mention `file` at all.
pub fn lines_about(stderr: &Lines, file: &Path) -> Vec<String> {
    let name = file.display().to_string();
    stderr
        .snapshot()
        .into_iter()
        .filter(|l| l.contains(&name))
        .collect()
}
