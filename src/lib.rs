//! staticd as a library: everything but main.rs, so that the binary,
//! benchmarks, fuzz targets and property tests share one build.
//!
//! ARCHITECTURE.md is the map of these modules: their layers (layers.txt,
//! checked by tests/layers.rs), the life of a request, and which file
//! holds which decision.

#[cfg(feature = "acme")]
pub mod acme;
#[cfg(feature = "auth")]
pub mod auth;
pub mod calendar;
pub mod cgi;
pub mod cli;
pub mod client_name;
pub mod complaint;
pub mod config;
pub mod exchange;
#[cfg(feature = "http2")]
pub mod h2session;
#[cfg(feature = "http3")]
pub mod h3session;
pub mod http;
pub mod log;
pub mod metrics;
#[cfg(feature = "http2")]
pub mod nghttp2;
pub mod origin;
pub mod pace;
pub mod page;
pub mod pipeline;
pub mod pool;
pub mod privileges;
pub mod proxy;
pub mod respond;
pub mod rules;
pub mod serve;
pub mod session;
pub mod site;
pub mod start;
pub mod sys;
#[cfg(feature = "tls")]
pub mod tls;
pub mod unsent;
