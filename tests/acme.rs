//! Automatic HTTPS (issue 13) against a real ACME server: Debian's Pebble, with
//! pebble-challtestsrv as its DNS server (`common::Pebble`), all on loopback.
#![cfg(feature = "tls")]

#[macro_use]
mod common;

use common::*;

/// The harness itself: Pebble starts, its directory answers (checked by `start`), and
/// its management API hands out the root it issues under.
#[test]
fn pebble_starts_and_hands_out_its_root() {
    let Some(pebble) = Pebble::builder(free_port(), free_port()).start() else {
        return;
    };
    let root = std::fs::read_to_string(pebble.root_file()).unwrap();
    assert!(root.contains("-----END CERTIFICATE-----"), "{root}");
    let _ = pebble.client("a.staticd.test");
}
