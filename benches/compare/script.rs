//! The compression cell's file: a 100 KB script of minified-looking
//! JavaScript, its URL path and its size. docroot.rs writes it, servers.rs
//! configures compression for it, compressed.rs measures it.

use std::fmt::Write as _;
use std::io;
use std::path::Path;

/// The file's URL path and size.
pub const PATH: &str = "/app.js";
pub const SIZE: usize = 100_000;

/// Writes the script into the document root: minified-looking JavaScript
/// from a fixed seed, which compresses about as real scripts do.
pub fn write(root: &Path) -> io::Result<()> {
    std::fs::write(root.join(PATH.trim_start_matches('/')), script())
}

fn script() -> Vec<u8> {
    const WORDS: [&str; 40] = [
        "length",
        "push",
        "map",
        "filter",
        "forEach",
        "call",
        "apply",
        "value",
        "index",
        "options",
        "callback",
        "result",
        "event",
        "target",
        "style",
        "className",
        "children",
        "parentNode",
        "querySelector",
        "addEventListener",
        "setTimeout",
        "resolve",
        "then",
        "stringify",
        "parse",
        "data",
        "state",
        "props",
        "render",
        "update",
        "node",
        "key",
        "name",
        "type",
        "error",
        "config",
        "prototype",
        "element",
        "handler",
        "items",
    ];
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |n: usize| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % n as u64) as usize
    };
    let mut js = String::from("/*! bench script, generated */\n\"use strict\";");
    let mut fresh = 0u32;
    while js.len() < SIZE {
        fresh += 1;
        let w = |i: usize| WORDS[i];
        let (a, b, c) = (w(next(40)), w(next(40)), w(next(40)));
        let num = next(10_000);
        let _ = match next(4) {
            0 => write!(
                js,
                "function {a}_{fresh:x}(e,t,n){{var r=e.{b}(t);if(r&&r.{c}>{num}){{return r.{a}(n)}}return null}}"
            ),
            1 => write!(
                js,
                "var {b}{fresh:x}={{{a}:{num},{c}:\"{b} {a}\",{b}:function(e){{return this.{c}+e}}}};"
            ),
            2 => write!(
                js,
                "e.prototype.{c}=function(t){{for(var n=0;n<t.{a};n++){{this.{b}(t[n],{num})}}return this}};"
            ),
            _ => write!(
                js,
                "document.{a}(\"{b}\",function(e){{e.{c}.{a}=\"{c}-{num}\";{b}{fresh:x}.{c}(e)}});"
            ),
        };
    }
    js.truncate(SIZE);
    js.into_bytes()
}
