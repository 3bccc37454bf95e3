//! Link options for the staticd binary that make it start faster; nothing
//! here changes what it does.
//!
//! On glibc, Rust links the unwinder from libgcc_s.so.1. Loading that
//! library runs its constructor, `__cpu_indicator_init`, which executes
//! CPUID twelve times, and CPUID traps to the hypervisor on a VM: about
//! 15-40 µs each on the development VM, so a few hundred µs of every inetd
//! process start (benches/results/2026-11-30-to-2026-12-01.md, "inetd
//! start-up"). The same unwinder,
//! from libgcc_eh.a (what `gcc -static-libgcc` links), is linked into the
//! binary instead; libgcc_s is then not needed (Rust links with
//! --as-needed), nor loaded. Panics, their backtraces and catch_unwind work
//! as before. Where libgcc_eh.a cannot be found, nothing changes.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let is = |var: &str, value: &str| env::var(var).is_ok_and(|v| v == value);
    let crt_static = env::var("CARGO_CFG_TARGET_FEATURE")
        .is_ok_and(|features| features.split(',').any(|f| f == "crt-static"));
    if !is("CARGO_CFG_TARGET_OS", "linux") || !is("CARGO_CFG_TARGET_ENV", "gnu") || crt_static {
        return;
    }
    let Some(archive) = libgcc_eh() else {
        return;
    };
    // After everything else on the command line, so whole-archive: its
    // definitions of _Unwind_* then win over libgcc_s's, and --as-needed
    // drops libgcc_s. Only the binary: tests and benches keep the default.
    println!("cargo:rustc-link-arg-bins=-Wl,--whole-archive");
    println!("cargo:rustc-link-arg-bins={}", archive.display());
    println!("cargo:rustc-link-arg-bins=-Wl,--no-whole-archive");
}

/// libgcc_eh.a of the C compiler that links the binary (the linker driver
/// Rust uses: `cc`, or $CC), if it has one.
fn libgcc_eh() -> Option<PathBuf> {
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    println!("cargo:rerun-if-env-changed=CC");
    let out = Command::new(cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    // An unknown file is printed back as its bare name.
    (out.status.success() && path.is_absolute() && path.is_file()).then_some(path)
}
