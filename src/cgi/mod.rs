//! CGI/1.1 (RFC 3875): the script's environment (`environment`), its
//! response-header block (`response_head`), and the life of its
//! process (`process`).
//!
//! The protocol halves are pure and tested with byte strings; the process
//! half spawns and cleans up but never reads the script's stdout, so both
//! transports can drive the pipes in their own way:
//!
//! ```text
//! is_cgi_name(b"a.cgi") && is_runnable(&metadata)    decide that a file is a script
//! Limiter::new(max) / limiter.try_acquire()           None: answer 503
//! spawn(&CgiParams, timeout, permit) -> Script        Err: answer 500 (403 for PermissionDenied)
//! script.take_stdin()                                 Some only when the request has a body:
//!                                                     write it, then drop the handle (EOF)
//! script.take_stdout()                                read into a buffer until
//! parse_header_block(&buf, eof) -> HeaderBlock        Complete(head, body_start) | Malformed (502)
//! script.deadline() / script.kill_group()             past the deadline: kill, answer 504 or cut
//! drop(script)                                        kills what is left of the group and reaps
//! ```
//!
//! Write the body and read stdout at the same time (poll both): a script may
//! answer before it has read all of its input, and with both pipes full each
//! side would wait for the other until the deadline. For the tokio
//! transport, `tokio::net::unix::pipe::{Sender, Receiver}::from_owned_fd`
//! accept the taken handles (converted with `OwnedFd::from`) and make them
//! non-blocking.

mod environment;
mod process;
mod response_head;

pub use environment::{environment, CgiParams};
pub use process::{finish_stderr, spawn, Limiter, Permit, Script};
pub use response_head::{parse_header_block, CgiHead, HeaderBlock, Location, MAX_HEAD};

use std::os::unix::fs::PermissionsExt;

/// Whether a file name marks a CGI script. `.cgi` on its own is a hidden
/// file, not a script.
pub fn is_cgi_name(name: &[u8]) -> bool {
    name.len() > 4 && name.ends_with(b".cgi")
}

/// Whether a file can be run as a script: a regular file with an execute
/// bit. Whether *this* user may run it is left to exec, which reports
/// PermissionDenied.
pub fn is_runnable(meta: &std::fs::Metadata) -> bool {
    meta.is_file() && meta.permissions().mode() & 0o111 != 0
}

/// Also what the other CGI modules' tests share.
#[cfg(test)]
mod tests {
    use super::*;

    /// One request as a test script sees it.
    pub(super) fn params<'a>(headers: &'a [(&'a str, &'a str)]) -> CgiParams<'a> {
        CgiParams {
            script_path: std::path::Path::new("/srv/www/a.cgi"),
            script_name: "/a.cgi",
            path_info: "",
            query: "",
            method: "GET",
            protocol: "HTTP/1.1",
            headers,
            content_length: None,
            server_name: "example.org",
            server_port: 8080,
            remote_addr: "192.0.2.7",
            remote_port: Some(40000),
            https: false,
        }
    }

    /// The head of a script's complete output.
    pub(super) fn complete(out: &[u8]) -> (CgiHead, usize) {
        match parse_header_block(out, false) {
            HeaderBlock::Complete(head, start) => (head, start),
            other => panic!("{other:?} for {:?}", String::from_utf8_lossy(out)),
        }
    }

    #[test]
    fn cgi_names() {
        assert!(is_cgi_name(b"a.cgi"));
        assert!(is_cgi_name(b"x.y.cgi"));
        assert!(!is_cgi_name(b".cgi"));
        assert!(!is_cgi_name(b"a.CGI"));
        assert!(!is_cgi_name(b"a.cgi.txt"));
    }
}
