//! The `Basic` credentials of an Authorization field (RFC 7617), decoded
//! into a buffer on the stack: checking a request allocates nothing.

use base64::engine::general_purpose::STANDARD_PAD_INDIFFERENT;
use base64::Engine;

/// Longest base64 token read: 1 KiB of credentials once decoded. Anything
/// longer is no one's password, and a long one would make SHA-crypt, whose
/// cost grows with the square of the password's length, slow.
const MAX_TOKEN: usize = 1368;
const MAX_DECODED: usize = MAX_TOKEN / 4 * 3;

/// A user id and password, as sent.
pub struct Credentials {
    buf: [u8; MAX_DECODED],
    len: usize,
    colon: usize,
}

impl Credentials {
    /// The user id: never holds a `:` (the first one ends it).
    pub fn user(&self) -> &[u8] {
        self.buf.get(..self.colon).unwrap_or_default()
    }

    pub fn password(&self) -> &[u8] {
        self.buf.get(self.colon + 1..self.len).unwrap_or_default()
    }
}

/// `Basic <token68>` (scheme in any case, spaces around the token) as
/// credentials; None for any other scheme, a token that is not base64 or
/// too long, credentials without a `:` or with a control character. Bytes are not checked to be
/// UTF-8: they are compared as bytes, the charset="UTF-8" the challenge
/// announces is what browsers then send.
pub fn decode(authorization: &[u8]) -> Option<Credentials> {
    let value = authorization.trim_ascii();
    let (scheme, token) = value.split_at_checked(5)?;
    if !scheme.eq_ignore_ascii_case(b"basic") || !token.first()?.is_ascii_whitespace() {
        return None;
    }
    let token = token.trim_ascii();
    if token.len() > MAX_TOKEN {
        return None;
    }
    let mut credentials = Credentials {
        buf: [0; MAX_DECODED],
        len: 0,
        colon: 0,
    };
    credentials.len = STANDARD_PAD_INDIFFERENT
        .decode_slice(token, &mut credentials.buf)
        .ok()?;
    let decoded = credentials.buf.get(..credentials.len)?;
    // RFC 7617 §2 forbids control characters in both; a NUL would also end
    // the password early for bcrypt, as for the C htpasswd that made it.
    if decoded.iter().any(|&b| b.is_ascii_control()) {
        return None;
    }
    credentials.colon = decoded.iter().position(|&b| b == b':')?;
    Some(credentials)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(header: &str) -> Option<(String, String)> {
        let c = decode(header.as_bytes())?;
        let s = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
        Some((s(c.user()), s(c.password())))
    }

    fn some(user: &str, password: &str) -> Option<(String, String)> {
        Some((user.to_string(), password.to_string()))
    }

    #[test]
    fn rfc_7617_example_and_forms() {
        // RFC 7617 §2: Aladdin / open sesame.
        assert_eq!(
            pair("Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="),
            some("Aladdin", "open sesame")
        );
        assert_eq!(
            pair("basic QWxhZGRpbjpvcGVuIHNlc2FtZQ=="),
            some("Aladdin", "open sesame")
        );
        assert_eq!(
            pair("BASIC   QWxhZGRpbjpvcGVuIHNlc2FtZQ== "),
            some("Aladdin", "open sesame")
        );
        assert_eq!(
            pair("Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ"),
            some("Aladdin", "open sesame")
        );
        // RFC 7617 §2.1: test / 123£ in UTF-8.
        assert_eq!(pair("Basic dGVzdDoxMjPCow=="), some("test", "123£"));
        // The password may hold colons; the user cannot.
        assert_eq!(pair("Basic YTpiOmM="), some("a", "b:c"));
        assert_eq!(pair("Basic Ojo="), some("", ":"));
        assert_eq!(pair("Basic YTo="), some("a", ""));
    }

    #[test]
    fn refused() {
        for header in [
            "",
            "Basic",
            "Basic ",
            "BasicQWxhZGRpbjpvcGVuIHNlc2FtZQ==",
            "Bearer QWxhZGRpbjpvcGVuIHNlc2FtZQ==",
            "Digest username=\"a\"",
            "Basic YWJj",                          // "abc": no colon
            "Basic QWxh ZGRpbjpvcGVuIHNlc2FtZQ==", // space inside the token
            "Basic !!!!",
            "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ===",
            "Basic YTpiAGM=", // "a:b\0c"
            "Basic YQk6Yg==", // "a\t:b"
            "Basic YTpifw==", // "a:b\x7f"
        ] {
            assert!(pair(header).is_none(), "{header:?}");
        }
        let long = format!("Basic {}", "QUFB".repeat(MAX_TOKEN / 4 + 1));
        assert!(pair(&long).is_none());
        let longest = format!("Basic {}Ojo=", "QUFB".repeat(MAX_TOKEN / 4 - 1));
        assert_eq!(pair(&longest).unwrap().0.len(), MAX_DECODED - 3);
    }

    #[test]
    fn non_utf8_bytes_pass_as_bytes() {
        let c = decode(b"Basic /zr/").unwrap(); // ff 3a ff
        assert_eq!(c.user(), b"\xff");
        assert_eq!(c.password(), b"\xff");
        assert!(decode(b"Basic \xff\xfe").is_none());
    }
}
