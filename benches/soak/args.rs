//! The soak's command line: --minutes N [--out DIR] [--staticd PATH].

use std::path::PathBuf;

/// What the command line asked for.
pub struct Args {
    pub minutes: f64,
    pub out: PathBuf,
    pub staticd: Option<PathBuf>,
}

pub fn args() -> Args {
    let mut a = Args {
        minutes: 3.0,
        out: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/soak"),
        staticd: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        match x.as_str() {
            "--minutes" => a.minutes = it.next().and_then(|v| v.parse().ok()).expect("--minutes N"),
            "--out" => a.out = it.next().map(PathBuf::from).expect("--out DIR"),
            "--staticd" => a.staticd = it.next().map(PathBuf::from),
            "--bench" => {}
            other => {
                eprintln!("soak: unknown argument {other}; usage: --minutes N [--out DIR] [--staticd PATH]");
                std::process::exit(2);
            }
        }
    }
    a
}
