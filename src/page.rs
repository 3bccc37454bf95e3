//! The HTML that staticd writes itself, as opposed to the site's files: one
//! small stylesheet, shared by the generated listings and the error pages,
//! and the error pages, which are string literals so that sending one costs
//! no more than sending the plain-text line.
//!
//! Everything is inline: a page staticd writes makes no further requests,
//! so it looks right even when the site has no stylesheet of its own.

use crate::http::status::Status;

/// The stylesheet, as a literal macro so that `concat!` can build the error
/// pages at compile time. Light and dark follow the reader's system setting;
/// colours keep a contrast of at least 4.5:1 for text.
macro_rules! stylesheet {
    () => {
        ":root { color-scheme: light dark; --ink: #1d3b53; --paper: #f4f1ea; --muted: #56626d;
  --line: #d6d0c0; --accent: #a8491a; --hover: #ebe5d8; }
@media (prefers-color-scheme: dark) {
  :root { --ink: #e8e3d6; --paper: #14212c; --muted: #a3b0ba; --line: #2c4258;
    --accent: #f0a070; --hover: #1b2c3a; }
}
* { box-sizing: border-box; }
html { background: var(--paper); color: var(--ink); -webkit-text-size-adjust: 100%; }
body { max-width: 60rem; margin: 0 auto; padding: 2rem 1.25rem 3rem;
  font: 16px/1.5 system-ui, -apple-system, \"Segoe UI\", Roboto, sans-serif; }
h1 { margin: 0 0 1.25rem; font-size: 1.6rem; line-height: 1.25; overflow-wrap: anywhere; }
a { color: inherit; text-decoration-color: var(--accent); text-underline-offset: 0.15em; }
a:hover { color: var(--accent); }
table { width: 100%; border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { padding: 0.45rem 0.6rem; text-align: left; vertical-align: baseline; }
th { border-bottom: 2px solid var(--ink); font-weight: 600; white-space: nowrap; }
th a { text-decoration: none; }
th a:hover { text-decoration: underline; }
td { border-bottom: 1px solid var(--line); }
tbody tr:hover { background: var(--hover); }
td.name { width: 100%; overflow-wrap: anywhere; }
td.name a { display: block; }
tr.dir td.name a { font-weight: 600; }
.size, .date { text-align: right; white-space: nowrap; }
td.size, td.date { color: var(--muted); }
.note { margin-top: 1.5rem; color: var(--muted); font-size: 0.9rem; }
.error { max-width: 36rem; margin: 8vh auto 0; }
.error h1 .code { display: block; font-size: 3.5rem; line-height: 1; color: var(--accent); }
/* A phone: each entry becomes two lines, the name above its size and date,
   rather than three squeezed columns. */
@media (max-width: 32rem) {
  body { padding: 1.25rem 0.75rem 2rem; }
  h1 { font-size: 1.35rem; }
  table, thead, tbody { display: block; }
  tr { display: flex; flex-wrap: wrap; column-gap: 1.25rem; padding: 0.5rem 0.25rem;
    border-bottom: 1px solid var(--line); }
  thead tr { border-bottom: 2px solid var(--ink); }
  th, td { padding: 0; border: 0; }
  /* Headings as the rows: the name on a line of its own, then size and date
     over their columns. */
  .name { flex: 1 0 100%; }
  .size, .date { font-size: 0.875rem; text-align: left; }
  .size { min-width: 4.5rem; }
  td:empty { display: none; }
}
"
    };
}

/// Everything before a page's title: a standalone HTML5 head with the
/// viewport set, so that phones do not shrink the page to fit 980 px.
macro_rules! page_start {
    () => {
        concat!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
            // An empty icon: without it every page view asks for /favicon.ico,
            // and a site without one logs a 404 each time.
            "<link rel=\"icon\" href=\"data:,\">\n",
            "<style>\n",
            stylesheet!(),
            "</style>\n<title>"
        )
    };
}

macro_rules! title_end {
    () => {
        "</title>\n</head>\n<body>\n"
    };
}

pub const PAGE_START: &str = page_start!();
/// Between the (escaped) title and the body's content.
pub const TITLE_END: &str = title_end!();
pub const PAGE_END: &str = "</body>\n</html>\n";

/// An error page: the status as title and heading, a sentence for a person,
/// and a way back. Nothing of the request is echoed, so nothing needs escaping.
macro_rules! error_page {
    ($code:literal, $reason:literal, $why:literal) => {
        concat!(
            page_start!(),
            $code,
            " ",
            $reason,
            title_end!(),
            "<main class=\"error\">\n<h1><span class=\"code\">",
            $code,
            "</span> ",
            $reason,
            "</h1>\n<p>",
            $why,
            "</p>\n<p class=\"note\"><a href=\"/\">Go to the front page</a></p>\n</main>\n",
            "</body>\n</html>\n"
        )
    };
}

/// The HTML page for an error status; None for the statuses that are not
/// errors (their bodies, if any, are not meant to be read).
pub fn error_page(status: Status) -> Option<&'static str> {
    Some(match status {
        Status::Ok
        | Status::NoContent
        | Status::PartialContent
        | Status::MovedPermanently
        | Status::Found
        | Status::SeeOther
        | Status::TemporaryRedirect
        | Status::PermanentRedirect
        | Status::NotModified => return None,
        Status::Unauthorized => error_page!(
            "401",
            "Unauthorized",
            "This part of the site needs a user name and password. Reload the page to \
             enter them again."
        ),
        Status::BadRequest => error_page!(
            "400",
            "Bad Request",
            "The server could not understand this request. The address may contain \
             a character that is not allowed, or climb above the site."
        ),
        Status::Forbidden => error_page!(
            "403",
            "Forbidden",
            "Something is at this address, but the server is not allowed to show it."
        ),
        Status::NotFound => error_page!(
            "404",
            "Not Found",
            "There is nothing at this address. Check it for typing mistakes, or start \
             again from the front page."
        ),
        Status::MethodNotAllowed => error_page!(
            "405",
            "Method Not Allowed",
            "This address can be read, not changed: it answers GET, HEAD and OPTIONS."
        ),
        Status::LengthRequired => error_page!(
            "411",
            "Length Required",
            "A request with a body needs a Content-Length here."
        ),
        Status::PreconditionFailed => error_page!(
            "412",
            "Precondition Failed",
            "The request asked for a version of this resource that is no longer the \
             current one."
        ),
        Status::UriTooLong => error_page!(
            "414",
            "URI Too Long",
            "The address is longer than this server accepts."
        ),
        Status::RangeNotSatisfiable => error_page!(
            "416",
            "Range Not Satisfiable",
            "The requested part lies beyond the end of the file."
        ),
        Status::HeaderFieldsTooLarge => error_page!(
            "431",
            "Request Header Fields Too Large",
            "The request's header fields are larger than this server accepts."
        ),
        Status::InternalServerError => error_page!(
            "500",
            "Internal Server Error",
            "Something went wrong on the server while answering. Please try again later."
        ),
        Status::BadGateway => error_page!(
            "502",
            "Bad Gateway",
            "The program behind this address did not give a valid answer."
        ),
        Status::ServiceUnavailable => error_page!(
            "503",
            "Service Unavailable",
            "The server is too busy to answer right now. Please try again in a moment."
        ),
        Status::NotImplemented => error_page!(
            "501",
            "Not Implemented",
            "The request uses a feature this server does not support, such as a \
             transfer coding other than chunked."
        ),
        Status::GatewayTimeout => error_page!(
            "504",
            "Gateway Timeout",
            "The program behind this address took too long to answer."
        ),
        Status::VersionNotSupported => error_page!(
            "505",
            "HTTP Version Not Supported",
            "This server speaks HTTP/1.0 and HTTP/1.1."
        ),
    })
}

/// Text for HTML: `<>&"'` escaped, so it is safe in content and in quoted
/// attribute values alike.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Status; 25] = [
        Status::Ok,
        Status::NoContent,
        Status::PartialContent,
        Status::MovedPermanently,
        Status::Found,
        Status::SeeOther,
        Status::TemporaryRedirect,
        Status::PermanentRedirect,
        Status::NotModified,
        Status::BadRequest,
        Status::Unauthorized,
        Status::Forbidden,
        Status::NotFound,
        Status::MethodNotAllowed,
        Status::LengthRequired,
        Status::PreconditionFailed,
        Status::UriTooLong,
        Status::RangeNotSatisfiable,
        Status::HeaderFieldsTooLarge,
        Status::InternalServerError,
        Status::NotImplemented,
        Status::BadGateway,
        Status::ServiceUnavailable,
        Status::GatewayTimeout,
        Status::VersionNotSupported,
    ];

    #[test]
    fn every_error_status_has_a_page_that_names_it() {
        for status in ALL {
            let is_error = status.code() >= 400;
            assert_eq!(error_page(status).is_some(), is_error, "{status:?}");
            let Some(page) = error_page(status) else {
                continue;
            };
            let (code, reason) = (status.code(), status.reason());
            assert!(page.starts_with("<!DOCTYPE html>"), "{status:?}");
            assert!(page.contains(&format!("<title>{code} {reason}</title>")));
            assert!(page.contains(&format!("<span class=\"code\">{code}</span> {reason}</h1>")));
            assert!(page.ends_with("</html>\n"));
        }
    }

    #[test]
    fn pages_are_self_contained_and_fit_phones() {
        let page = error_page(Status::NotFound).unwrap();
        assert!(page.contains("<meta name=\"viewport\""));
        assert!(page.contains("<style>"));
        assert!(page.contains("prefers-color-scheme: dark"));
        // The one link is the empty icon, which asks for nothing.
        let page = page.replace("<link rel=\"icon\" href=\"data:,\">", "");
        for external in ["<link", "<script", "src=", "@import", "url("] {
            assert!(!page.contains(external), "{external}");
        }
    }

    #[test]
    fn escapes_every_special_character() {
        assert_eq!(escape_html("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&#39;");
        assert_eq!(escape_html("plain ü"), "plain ü");
    }
}
