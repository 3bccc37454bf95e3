//! Status codes and their reason phrases (RFC 9110 §15).

/// One table for both: the statuses staticd decides itself (`ours`), and
/// the other registered ones a CGI script may choose (`others`).
macro_rules! statuses {
    (
        ours { $($name:ident = $code:literal $reason:literal,)* }
        others { $($other:literal $other_reason:literal,)* }
    ) => {
        /// The statuses staticd decides itself.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Status {
            $($name,)*
        }

        impl Status {
            pub fn code(self) -> u16 {
                match self {
                    $(Status::$name => $code,)*
                }
            }

            pub fn reason(self) -> &'static str {
                match self {
                    $(Status::$name => $reason,)*
                }
            }

            /// `<code> <reason>` and a newline: the body of a plain-text
            /// error, written once at compile time.
            pub fn line(self) -> &'static str {
                match self {
                    $(Status::$name => concat!($code, " ", $reason, "\n"),)*
                }
            }
        }

        /// The standard reason phrase for any status code, for a status a
        /// CGI script chose without one. A code with no registered phrase
        /// gets none: RFC 9112 §4 lets the phrase be empty, which is better
        /// than a made-up word.
        pub fn reason(code: u16) -> &'static str {
            match code {
                $($code => $reason,)*
                $($other => $other_reason,)*
                _ => "",
            }
        }
    };
}

statuses! {
    ours {
        Ok = 200 "OK",
        NoContent = 204 "No Content",
        PartialContent = 206 "Partial Content",
        MovedPermanently = 301 "Moved Permanently",
        Found = 302 "Found",
        SeeOther = 303 "See Other",
        NotModified = 304 "Not Modified",
        TemporaryRedirect = 307 "Temporary Redirect",
        PermanentRedirect = 308 "Permanent Redirect",
        BadRequest = 400 "Bad Request",
        Unauthorized = 401 "Unauthorized",
        Forbidden = 403 "Forbidden",
        NotFound = 404 "Not Found",
        MethodNotAllowed = 405 "Method Not Allowed",
        LengthRequired = 411 "Length Required",
        PreconditionFailed = 412 "Precondition Failed",
        UriTooLong = 414 "URI Too Long",
        RangeNotSatisfiable = 416 "Range Not Satisfiable",
        HeaderFieldsTooLarge = 431 "Request Header Fields Too Large",
        InternalServerError = 500 "Internal Server Error",
        NotImplemented = 501 "Not Implemented",
        BadGateway = 502 "Bad Gateway",
        ServiceUnavailable = 503 "Service Unavailable",
        GatewayTimeout = 504 "Gateway Timeout",
        VersionNotSupported = 505 "HTTP Version Not Supported",
    }
    others {
        100 "Continue",
        101 "Switching Protocols",
        201 "Created",
        202 "Accepted",
        203 "Non-Authoritative Information",
        205 "Reset Content",
        207 "Multi-Status",
        300 "Multiple Choices",
        305 "Use Proxy",
        402 "Payment Required",
        406 "Not Acceptable",
        407 "Proxy Authentication Required",
        408 "Request Timeout",
        409 "Conflict",
        410 "Gone",
        413 "Content Too Large",
        415 "Unsupported Media Type",
        417 "Expectation Failed",
        421 "Misdirected Request",
        422 "Unprocessable Content",
        425 "Too Early",
        426 "Upgrade Required",
        428 "Precondition Required",
        429 "Too Many Requests",
        451 "Unavailable For Legal Reasons",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_of_ours_has_its_phrase() {
        for (code, phrase) in [
            (206, "Partial Content"),
            (412, "Precondition Failed"),
            (416, "Range Not Satisfiable"),
            (504, "Gateway Timeout"),
            (201, "Created"),
            (418, ""),
            (599, ""),
        ] {
            assert_eq!(reason(code), phrase, "{code}");
        }
        assert_eq!(Status::GatewayTimeout.reason(), "Gateway Timeout");
        assert_eq!(Status::NotFound.line(), "404 Not Found\n");
        assert_eq!(Status::VersionNotSupported.code(), 505);
    }
}
