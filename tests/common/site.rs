//! Site files read by the server at run time (`_headers`, `_redirects`, htpasswd):
//! editing them as a person would, waiting for the server to pick the change up, and
//! the load-time messages about their lines.

use super::*;

/// How long a test waits for an edited site file to take effect: the server checks at
/// most once a second and should apply a change within about 2 s.
pub const RELOAD_LIMIT: Duration = Duration::from_secs(5);

/// Rewrites `path` in place with `contents`, as an editor saving it would: the mtime
/// becomes now (a file made by [`Docroot::file`] has a 1994 one), and the size changes
/// with the contents.
pub fn edit(path: &Path, contents: &str) {
    fs::write(path, contents).unwrap();
    set_mtime(path, SystemTime::now());
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
