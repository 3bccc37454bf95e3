//! Bounds on what a client may make the server hold.

/// Longest request-target accepted; longer is 414.
pub const MAX_TARGET_BYTES: usize = 8 * 1024;
/// Largest request head accepted; larger is 431.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// Most header fields accepted; more is 431.
pub const MAX_HEADERS: usize = 100;
/// Most ranges honoured in one Range header; more gets the whole file.
pub const MAX_RANGES: usize = 16;
/// Longest chunk-size line (with extensions) accepted while discarding a body.
pub const MAX_CHUNK_LINE: usize = 4096;
