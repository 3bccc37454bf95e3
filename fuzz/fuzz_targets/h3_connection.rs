//! See fuzz/README.md and the invariants in fuzz/src/checks.rs.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| staticd_fuzz::h3_connection(data));
