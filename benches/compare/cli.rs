//! The command lines of the harness's own modes (--seed-tables,
//! --inetd-cost): flags read one at a time, a value after the flag's `=`
//! or as the next argument; and a mode's run, which ends the process with
//! its exit code.

use std::time::Duration;

/// The arguments, read a flag at a time.
pub struct Args<'a> {
    rest: std::slice::Iter<'a, String>,
    /// The current flag's `=value`, if it had one.
    inline: Option<&'a str>,
}

impl<'a> Args<'a> {
    pub fn new(args: &'a [String]) -> Args<'a> {
        Args {
            rest: args.iter(),
            inline: None,
        }
    }

    /// The next flag, without its `=value` (`value` gives that).
    pub fn next_flag(&mut self) -> Option<&'a str> {
        let arg = self.rest.next()?;
        match arg.split_once('=') {
            Some((flag, v)) if flag.starts_with("--") => {
                self.inline = Some(v);
                Some(flag)
            }
            _ => {
                self.inline = None;
                Some(arg)
            }
        }
    }

    /// The value of `flag`, the flag `next_flag` gave last: after its `=`,
    /// else the next argument.
    pub fn value(&mut self, flag: &str) -> Result<String, String> {
        self.inline
            .take()
            .or_else(|| self.rest.next().map(String::as_str))
            .map(String::from)
            .ok_or_else(|| format!("{flag} needs a value"))
    }
}

/// `v` as a number of seconds under 600; 0 too when `zero` allows it.
pub fn seconds(flag: &str, v: &str, zero: bool) -> Result<Duration, String> {
    v.parse::<f64>()
        .ok()
        .filter(|s| (*s > 0.0 || (zero && *s == 0.0)) && *s < 600.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{flag}: not a number of seconds: {v}"))
}

/// Runs the mode `flag` on its parsed command line and exits: 2 for a bad
/// command line (said with the usage), 1 for a run that failed or was
/// interrupted, 0 otherwise. Ctrl-C stops it as it stops the comparison.
pub fn run_mode<O>(
    flag: &str,
    usage: &str,
    parsed: Result<O, String>,
    run: impl FnOnce(&O) -> Result<(), String>,
) -> ! {
    crate::stop::install_signal_handlers();
    let code = match parsed {
        Err(e) => {
            eprintln!("compare {flag}: {e}\n\n{usage}");
            2
        }
        Ok(o) => match run(&o) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("compare {flag}: {e}");
                1
            }
        },
    };
    std::process::exit(code)
}
