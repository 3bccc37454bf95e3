//! Counters for `--metrics`: what happened, counted per thread where it
//! happens (one-line hooks in the transports, the session, the open-file
//! cache, TLS and CGI), summed and shown in the Prometheus text format by
//! a listener of its own.
//!
//! The hooks cost a thread-local load and store each: no allocation, no
//! lock, no write to memory another thread writes. They count whether or
//! not `--metrics` is given (the branch would cost about as much).

mod counters;
mod endpoint;
mod exposition;

pub use counters::{body_bytes, count, request, totals, Event, RequestKind, Totals};
pub use endpoint::Endpoint;
pub use exposition::{features, render, Process, CONTENT_TYPE};
