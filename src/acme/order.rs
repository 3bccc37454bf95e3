//! One certificate order (RFC 8555 7.4), from new-order to the chain:
//! answer one challenge per authorization, wait for the CA to validate,
//! finalize with a fresh key, download.

use instant_acme::{
    Account, AuthorizationStatus, CertificateIdentifier, ChallengeType, Identifier, NewOrder,
    OrderStatus, RetryPolicy,
};
use std::time::Duration;

use super::state::{Answer, StateDir};
use crate::config::Challenge;

/// What an order brought.
pub struct Obtained {
    pub chain_pem: String,
    pub key_pem: String,
    /// The challenge answered, or None when the CA reused a valid
    /// authorization and asked for none.
    pub challenge: Option<Challenge>,
}

/// Why an order failed, for the log line and the retry.
pub struct Failed {
    pub why: String,
    /// The ACME problem type, e.g. `urn:ietf:params:acme:error:rateLimited`.
    pub problem: Option<String>,
}

impl From<instant_acme::Error> for Failed {
    fn from(e: instant_acme::Error) -> Failed {
        let problem = match &e {
            instant_acme::Error::Api(p) => p.r#type.clone(),
            _ => None,
        };
        // hyper's errors say "client error (Connect)" and keep the why
        // (refused, TLS, DNS) in their sources.
        let mut why = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(inner) = source {
            let said = inner.to_string();
            if !why.contains(&said) {
                why = format!("{why}: {said}");
            }
            source = inner.source();
        }
        Failed { why, problem }
    }
}

impl From<&str> for Failed {
    fn from(why: &str) -> Failed {
        Failed::from(why.to_string())
    }
}

impl From<String> for Failed {
    fn from(why: String) -> Failed {
        Failed { why, problem: None }
    }
}

/// How long to wait for the CA to validate and then to issue.
fn patience() -> RetryPolicy {
    RetryPolicy::new()
        .initial_delay(Duration::from_millis(250))
        .backoff(1.5)
        .timeout(Duration::from_secs(90))
}

/// Orders a certificate for `name`, answering with the first kind in
/// `kinds` that the CA offers. `replaces`: the certificate this one
/// renews, for a CA with renewal information (RFC 9773 5).
pub async fn obtain(
    account: &Account,
    name: &str,
    kinds: &[Challenge],
    state: &StateDir,
    replaces: Option<CertificateIdentifier<'static>>,
) -> Result<Obtained, Failed> {
    let identifiers = [Identifier::Dns(name.to_string())];
    let mut request = NewOrder::new(&identifiers);
    if let Some(old) = replaces {
        request = request.replaces(old);
    }
    let mut order = account.new_order(&request).await?;
    // Withdrawn when this function returns, whatever happened.
    let mut answers: Vec<Answer> = Vec::new();
    let mut used = None;
    let mut authorizations = order.authorizations();
    while let Some(authz) = authorizations.next().await {
        let mut authz = authz?;
        match authz.status {
            AuthorizationStatus::Pending => {}
            AuthorizationStatus::Valid => continue,
            other => return Err(format!("the authorization is {other:?}").into()),
        }
        let offered: Vec<ChallengeType> =
            authz.challenges.iter().map(|c| c.r#type.clone()).collect();
        let Some(kind) = kinds
            .iter()
            .copied()
            .find(|k| offered.contains(&challenge_type(*k)))
        else {
            let wanted: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
            return Err(format!("the CA offers none of {}", wanted.join(", ")).into());
        };
        let Some(mut challenge) = authz.challenge(challenge_type(kind)) else {
            continue;
        };
        let key_authorization = challenge.key_authorization();
        let answer = match kind {
            Challenge::Http01 => state.put_http01(&challenge.token, key_authorization.as_str()),
            Challenge::TlsAlpn01 => {
                let pem = tls_alpn01_certificate(name, key_authorization.digest().as_ref())?;
                state.put_tls_alpn01(name, &pem)
            }
        }
        .map_err(|e| format!("publishing the {} answer: {e}", kind.as_str()))?;
        answers.push(answer);
        challenge.set_ready().await?;
        used = Some(kind);
    }
    let status = order.poll_ready(&patience()).await?;
    if status != OrderStatus::Ready {
        return Err(invalid_order(&mut order).await.into());
    }
    let key_pem = order.finalize().await?;
    let chain_pem = order.poll_certificate(&patience()).await?;
    drop(answers);
    Ok(Obtained {
        chain_pem,
        key_pem,
        challenge: used,
    })
}

fn challenge_type(kind: Challenge) -> ChallengeType {
    match kind {
        Challenge::Http01 => ChallengeType::Http01,
        Challenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
    }
}

/// What the CA said about a failed validation: the first challenge error
/// of the authorizations, else the order's own.
async fn invalid_order(order: &mut instant_acme::Order) -> String {
    let mut authorizations = order.authorizations();
    while let Some(Ok(mut authz)) = authorizations.next().await {
        if let Ok(state) = authz.refresh().await {
            if let Some(problem) = state.challenges.iter().find_map(|c| c.error.as_ref()) {
                return format!("validation failed: {problem}");
            }
        }
    }
    match &order.state().error {
        Some(problem) => format!("the order failed: {problem}"),
        None => format!("the order is {:?}", order.state().status),
    }
}

/// RFC 8737 3: a self-signed certificate for `name` with the critical
/// acmeIdentifier extension holding the SHA-256 of the key authorization,
/// as PEM (certificate, then its key).
fn tls_alpn01_certificate(name: &str, digest: &[u8]) -> Result<String, String> {
    use rcgen::{CertificateParams, CustomExtension, KeyPair};
    let key = KeyPair::generate().map_err(|e| format!("challenge key: {e}"))?;
    let mut params = CertificateParams::new(vec![name.to_string()])
        .map_err(|e| format!("challenge certificate: {e}"))?;
    params.custom_extensions = vec![CustomExtension::new_acme_identifier(digest)];
    let cert = params
        .self_signed(&key)
        .map_err(|e| format!("challenge certificate: {e}"))?;
    Ok(format!("{}{}", cert.pem(), key.serialize_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_certificate_carries_the_critical_acme_identifier() {
        use x509_parser::prelude::*;
        let digest = [7u8; 32];
        let pem = tls_alpn01_certificate("a.example.org", &digest).unwrap();
        let chain = crate::tls::challenge_from_pem(pem.as_bytes()).unwrap();
        let (_, cert) = parse_x509_certificate(&chain.cert[0]).unwrap();
        let acme = cert
            .extensions()
            .iter()
            .find(|e| e.oid.to_id_string() == "1.3.6.1.5.5.7.1.31")
            .expect("acmeIdentifier extension");
        assert!(acme.critical);
        // An OCTET STRING of the 32-byte digest.
        assert_eq!(acme.value[..2], [0x04, 32]);
        assert_eq!(&acme.value[2..], &digest);
        let names = cert.subject_alternative_name().unwrap().unwrap();
        assert_eq!(
            names.value.general_names,
            vec![GeneralName::DNSName("a.example.org")]
        );
    }
}
