//! Who a connection or request is from when a proxy or load balancer
//! stands in between: the PROXY protocol header (`--proxy-protocol`) and
//! the forwarding headers of trusted proxies (`--trusted-proxy`). Pure
//! functions of bytes and settings; the transports do the reading.

pub mod forwarded;
pub mod header;
