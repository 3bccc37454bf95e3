//! Where a program is installed: the servers, their helpers and the load
//! clients are looked for on PATH and in the usual system directories.

use std::path::{Path, PathBuf};

/// The program's path: PATH first, then the sbin and bin directories a
/// user's PATH may lack, then ~/.cargo/bin.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let extra = [
        "/usr/sbin",
        "/sbin",
        "/usr/local/sbin",
        "/usr/bin",
        "/usr/local/bin",
    ];
    let mut dirs: Vec<PathBuf> = path.split(':').map(PathBuf::from).collect();
    dirs.extend(extra.map(PathBuf::from));
    // Where `cargo install` puts static-web-server.
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(Path::new(&home).join(".cargo/bin"));
    }
    dirs.iter()
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}
