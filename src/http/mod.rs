//! HTTP/1.x as data: no socket I/O anywhere below here.

pub mod body;
pub mod conditional;
#[cfg(feature = "http2")]
pub mod h2;
pub mod limits;
pub mod parse;
pub mod range;
pub mod response;
