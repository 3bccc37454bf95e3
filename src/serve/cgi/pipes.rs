//! A CGI script's pipes on the tokio runtime: taking them from the child,
//! and reads and writes that simply never finish when there is no pipe (so
//! a `select!` branch for a pipe that is gone, or not yet there, waits
//! rather than spins).

use std::io;
use std::process::{ChildStdin, ChildStdout};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::pipe;

/// The script's input (None when the request has no body) and output.
pub(crate) fn attach(
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
) -> io::Result<(Option<pipe::Sender>, pipe::Receiver)> {
    let stdin = match stdin {
        Some(stdin) => Some(pipe::Sender::from_owned_fd(stdin.into())?),
        None => None,
    };
    Ok((stdin, pipe::Receiver::from_owned_fd(stdout.into())?))
}

/// Reads the script's output; never ready without one.
pub(crate) async fn read(stdout: &mut Option<pipe::Receiver>, buf: &mut [u8]) -> io::Result<usize> {
    match stdout {
        Some(stdout) => stdout.read(buf).await,
        None => std::future::pending().await,
    }
}

/// Writes to the script's input; never ready without one.
pub(crate) async fn write(stdin: &mut Option<pipe::Sender>, bytes: &[u8]) -> io::Result<usize> {
    match stdin {
        Some(stdin) => stdin.write(bytes).await,
        None => std::future::pending().await,
    }
}
