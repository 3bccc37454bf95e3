//! The man page and shell completions, generated from the same clap command
//! as `staticd --help` (so the three never disagree), outside the staticd
//! binary: clap_mangen and clap_complete are dev-dependencies, and a build
//! of staticd, the minimal one included, carries neither.
//!
//! ```text
//! cargo run --example gen -- man DIR            DIR/staticd.1
//! cargo run --example gen -- completions DIR    DIR/staticd.bash, DIR/_staticd, DIR/staticd.fish
//! cargo run --example gen -- all DIR            both
//! ```
//!
//! The Debian package installs what `all` writes (docs/packaging.md).

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
    eprintln!("usage: cargo run --example gen -- man|completions|all DIR");
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
