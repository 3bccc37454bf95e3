//! The man page and shell completions, generated from the same clap command
//! as `staticd --help` (so the three never disagree), outside the staticd
//! binary: clap_mangen and clap_complete are dev-dependencies, and a build
//! of staticd, the minimal one included, carries neither.
//!
//! ```text
//! cargo run --example gen -- man DIR            DIR/staticd.1
//! cargo run --example gen -- completions DIR    DIR/staticd.bash, DIR/_staticd, DIR/staticd.fish
//! cargo run --example gen -- all DIR            both
//! cargo run --example gen -- package DIR        both, and the systemd units as
//!                                               the Debian package installs them
//! ```
//!
//! `cargo deb` packs what `package` writes into target/package
//! (docs/packaging.md, `[package.metadata.deb]` in Cargo.toml).

use std::path::Path;
use std::process::ExitCode;

use clap::CommandFactory;
use clap_complete::Shell;
use staticd::cli::Cli;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (what, dir) = match args.as_slice() {
        [what, dir] => (what.as_str(), Path::new(dir)),
        _ => return usage(),
    };
    let outcome = std::fs::create_dir_all(dir).and_then(|()| match what {
        "man" => man(dir),
        "completions" => completions(dir),
        "all" => man(dir).and_then(|()| completions(dir)),
        "package" => man(dir)
            .and_then(|()| completions(dir))
            .and_then(|()| units(dir)),
        _ => Err(std::io::Error::other(format!("unknown output {what:?}"))),
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gen: {e}");
            usage()
        }
    }
}

fn usage() -> ExitCode {
    eprintln!("usage: cargo run --example gen -- man|completions|all|package DIR");
    ExitCode::from(2)
}

/// DIR/staticd.1: the long help of every flag (with its STATICD_*
/// variable and default), in sections as --help groups them.
fn man(dir: &Path) -> std::io::Result<()> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut page)?;
    let path = dir.join("staticd.1");
    std::fs::write(&path, page)?;
    println!("{}", path.display());
    Ok(())
}

/// DIR/staticd.bash, DIR/_staticd (zsh) and DIR/staticd.fish.
fn completions(dir: &Path) -> std::io::Result<()> {
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let path = clap_complete::generate_to(shell, &mut Cli::command(), "staticd", dir)?;
        println!("{}", path.display());
    }
    Ok(())
}

/// The units the package installs: examples/systemd's standalone and
/// socket-activated ones, with the package's paths (the binary in
/// /usr/bin, the demo site it ships as the root), so that there is one
/// copy of each unit to keep.
const UNITS: [&str; 3] = [
    "staticd.service",
    "staticd-activated.service",
    "staticd-activated.socket",
];

/// Where the package puts the demo site (`assets` in Cargo.toml).
const PACKAGED_ROOT: &str = "/usr/share/staticd/www";

/// DIR/systemd/<unit> for each of `UNITS`.
fn units(dir: &Path) -> std::io::Result<()> {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/systemd");
    let to = dir.join("systemd");
    std::fs::create_dir_all(&to)?;
    for name in UNITS {
        let text = std::fs::read_to_string(from.join(name))?;
        let packaged = text
            .replace("/usr/local/bin/staticd", "/usr/bin/staticd")
            .replace("--root /srv/www", &format!("--root {PACKAGED_ROOT}"));
        let path = to.join(name);
        std::fs::write(&path, packaged)?;
        println!("{}", path.display());
    }
    Ok(())
}
