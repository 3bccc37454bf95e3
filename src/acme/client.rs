//! The HTTP client that talks to the CA: instant-acme's own (hyper over
//! rustls, trusting the system's roots), plus `--acme-ca` when given, and
//! a note of the Retry-After the CA last sent with an error, which
//! instant-acme's errors do not carry.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::Request;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use instant_acme::{BodyWrapper, BytesResponse, Error, HttpClient};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;

use crate::sys::describe;

/// The most a Retry-After is heeded: a day, as the backoff.
const MAX_RETRY_AFTER: Duration = super::schedule::MAX_BACKOFF;

/// Makes clients (instant-acme takes one per account it builds).
#[derive(Clone)]
pub struct Clients {
    extra_roots: Vec<CertificateDer<'static>>,
    retry_after: Arc<Mutex<Option<SystemTime>>>,
}

impl Clients {
    /// Reads `--acme-ca` now, so that a bad file is a start-up error.
    pub fn new(ca: Option<&Path>) -> Result<Clients, String> {
        let extra_roots = match ca {
            None => Vec::new(),
            Some(path) => {
                let fail = |why: String| format!("--acme-ca {}: {why}", path.display());
                let pem = std::fs::read(path).map_err(|e| fail(describe(&e)))?;
                let roots: Vec<_> = CertificateDer::pem_slice_iter(&pem)
                    .collect::<Result<_, _>>()
                    .map_err(|e| fail(format!("not a PEM certificate file: {e}")))?;
                if roots.is_empty() {
                    return Err(fail("no certificate in the file".to_string()));
                }
                roots
            }
        };
        Ok(Clients {
            extra_roots,
            retry_after: Arc::new(Mutex::new(None)),
        })
    }

    /// A new client for instant-acme. Needs a tokio runtime to run in.
    pub fn client(&self) -> Result<Box<dyn HttpClient>, String> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let verifier = rustls_platform_verifier::Verifier::new_with_extra_roots(
            self.extra_roots.iter().cloned(),
            Arc::clone(&provider),
        )
        .map_err(|e| format!("the system's certificate roots: {e}"))?;
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS client: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .enable_http2()
            .build();
        let inner: Client<_, BodyWrapper<Bytes>> =
            Client::builder(TokioExecutor::new()).build(connector);
        Ok(Box::new(Noting {
            inner: Box::new(inner),
            retry_after: Arc::clone(&self.retry_after),
        }))
    }

    /// The Retry-After of the last error response, forgotten once read.
    pub fn take_retry_after(&self) -> Option<SystemTime> {
        self.retry_after
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

/// A client that notes Retry-After on error responses (429 rate limits,
/// 503 overload) before instant-acme turns them into errors.
struct Noting {
    inner: Box<dyn HttpClient>,
    retry_after: Arc<Mutex<Option<SystemTime>>>,
}

impl HttpClient for Noting {
    fn request(
        &self,
        req: Request<BodyWrapper<Bytes>>,
    ) -> Pin<Box<dyn Future<Output = Result<BytesResponse, Error>> + Send>> {
        let response = self.inner.request(req);
        let slot = Arc::clone(&self.retry_after);
        Box::pin(async move {
            let response = response.await?;
            let parts = &response.parts;
            if parts.status.is_client_error() || parts.status.is_server_error() {
                let value = parts.headers.get(http::header::RETRY_AFTER);
                if let Some(when) = value.and_then(|v| parse_retry_after(v.as_bytes())) {
                    *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(when);
                }
            }
            Ok(response)
        })
    }
}

/// Retry-After (RFC 9110 10.2.3): seconds or an HTTP-date, capped.
fn parse_retry_after(value: &[u8]) -> Option<SystemTime> {
    let text = std::str::from_utf8(value).ok()?.trim();
    let now = SystemTime::now();
    let when = match text.parse::<u64>() {
        Ok(secs) => now + Duration::from_secs(secs).min(MAX_RETRY_AFTER),
        Err(_) => httpdate::parse_http_date(text).ok()?,
    };
    Some(when.min(now + MAX_RETRY_AFTER))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        let now = SystemTime::now();
        let in_two_minutes = parse_retry_after(b"120").unwrap();
        let from_now = in_two_minutes.duration_since(now).unwrap();
        assert!(from_now >= Duration::from_secs(119) && from_now <= Duration::from_secs(121));
        let later = now + Duration::from_secs(3600);
        let date = httpdate::fmt_http_date(later);
        let parsed = parse_retry_after(date.as_bytes()).unwrap();
        assert!(parsed.duration_since(now).unwrap() > Duration::from_secs(3500));
        let capped = parse_retry_after(b"99999999").unwrap();
        assert!(capped.duration_since(now).unwrap() <= MAX_RETRY_AFTER + Duration::from_secs(1));
        assert!(parse_retry_after(b"soon").is_none());
    }
}
