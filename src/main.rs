//! staticd: a small, fast static-file web server.
//!
//! This file only turns the command line into a [`Config`](staticd::config::Config) and starts;
//! [`staticd::cli`](staticd::cli) holds the flags, [`staticd::start`](staticd::start) the start-up
//! order.

use std::process::ExitCode;

use staticd::cli::Cli;
use staticd::{serve, start, sys};

fn main() -> ExitCode {
    let cli = match Cli::from_command_line() {
        Ok(cli) => cli,
        Err(exit) => return exit,
    };
    // systemd's sockets and notification socket are taken before any thread
    // starts (their variables are cleared, for CGI scripts' sake).
    serve::notify::init();
    let passed = match serve::activation::take() {
        Ok(passed) => passed,
        Err(msg) => {
            eprintln!("staticd: {msg}");
            return ExitCode::FAILURE;
        }
    };
    if !passed.is_empty() && cli.names_listeners() {
        eprintln!("staticd: socket activation: serving the sockets passed by systemd, not --bind or --port (or STATICD_BIND, STATICD_PORT)");
    }
    // Before the config is made: --max-connections' default is what the
    // raised limit leaves room for.
    sys::raise_fd_limit();
    start::start(cli.into_config(), passed)
}
