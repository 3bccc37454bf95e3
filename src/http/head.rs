//! A response head as data: the status, the fields in order, and how the body is delimited.
//! [`respond`](crate::respond) decides it once; each protocol encodes it
//! ([`response`](crate::http::response): HTTP/1.1 bytes, [`fields`](crate::http::fields): HTTP/2
//! and HTTP/3 fields), adding what belongs to the connection rather than the response (Date,
//! Server, Connection, Strict-Transport-Security, the framing fields) as it does.
//!
//! Names and values live in one text buffer and the fields are spans of
//! it; both come from this thread's free lists and go back when the head
//! drops, so building a head allocates nothing once a thread is warm.

use std::fmt::{self, Write};
use std::ops::Range;

use super::status::{self, Status};
use crate::pool::{self, FreeList};

thread_local! {
    /// The text of heads: their names and values.
    static TEXT: FreeList<String> = const { FreeList::new() };
    /// The field lists of heads.
    static FIELDS: FreeList<Vec<Field>> = const { FreeList::new() };
}

/// Where a name or value lies in the head's text.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: u32,
    end: u32,
}

impl Span {
    fn range(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Field {
    name: Span,
    value: Span,
}

/// How the body is delimited: what HTTP/1.1 says with Content-Length or
/// chunked coding, and HTTP/2 with content-length or the stream's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body and no length (204, 304, a CGI response to HEAD).
    Empty,
    /// The body is this long (a response to HEAD says so and sends none).
    Length(u64),
    /// The length is known only when the body ends (a CGI script's output
    /// without Content-Length).
    Open,
}

pub struct Head {
    code: u16,
    /// A reason phrase a CGI script chose; None: the standard one.
    reason: Option<Span>,
    text: String,
    fields: Vec<Field>,
    pub framing: Framing,
}

impl Drop for Head {
    fn drop(&mut self) {
        pool::give(&TEXT, std::mem::take(&mut self.text));
        pool::give(&FIELDS, std::mem::take(&mut self.fields));
    }
}

impl Head {
    pub fn new(status: Status) -> Head {
        Head {
            code: status.code(),
            reason: None,
            text: pool::take(&TEXT),
            fields: pool::take(&FIELDS),
            framing: Framing::Empty,
        }
    }

    /// A head with any status code and reason phrase, as a CGI script may
    /// choose; an empty reason stands for the standard one.
    pub fn with_code(code: u16, reason: &str) -> Head {
        let mut head = Head::new(Status::Ok);
        head.code = code;
        if !reason.is_empty() {
            head.reason = Some(head.push_text(reason));
        }
        head
    }

    pub fn code(&self) -> u16 {
        self.code
    }

    /// The reason phrase of the status line (HTTP/1.1 only).
    pub fn reason(&self) -> &str {
        match self.reason {
            Some(span) => &self.text[span.range()],
            None => status::reason(self.code),
        }
    }

    fn push_text(&mut self, text: &str) -> Span {
        let start = self.text.len() as u32;
        self.text.push_str(text);
        Span {
            start,
            end: self.text.len() as u32,
        }
    }

    /// Writes `value` at the end of the text.
    fn push_display(&mut self, value: impl fmt::Display) -> Span {
        let start = self.text.len() as u32;
        // Writing to a String cannot fail.
        let _ = write!(self.text, "{value}");
        Span {
            start,
            end: self.text.len() as u32,
        }
    }

    pub fn header(&mut self, name: &str, value: &str) -> &mut Self {
        let name = self.push_text(name);
        let value = self.push_text(value);
        self.fields.push(Field { name, value });
        self
    }

    /// A field whose value is written straight into the head, without an
    /// intermediate String.
    pub fn header_display(&mut self, name: &str, value: impl fmt::Display) -> &mut Self {
        let name = self.push_text(name);
        let value = self.push_display(value);
        self.fields.push(Field { name, value });
        self
    }

    /// Removes every field named `name` (in any case).
    pub fn remove(&mut self, name: &str) {
        let text = &self.text;
        self.fields
            .retain(|f| !text[f.name.range()].eq_ignore_ascii_case(name));
    }

    /// Adds `value` to the list-valued field `name` (Vary, say): after its
    /// value when it is there already, else as a new field.
    pub fn append_to_list(&mut self, name: &str, value: impl fmt::Display) {
        let text = &self.text;
        let Some(i) = self
            .fields
            .iter()
            .position(|f| text[f.name.range()].eq_ignore_ascii_case(name))
        else {
            self.header_display(name, value);
            return;
        };
        // The joined value is written anew at the end of the text; the old
        // one stays unused there until the head is dropped.
        let old = self.fields[i].value.range();
        let start = self.text.len() as u32;
        self.text.extend_from_within(old);
        let _ = write!(self.text, ", {value}");
        self.fields[i].value = Span {
            start,
            end: self.text.len() as u32,
        };
    }

    /// The first field named `name` (in any case).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// The fields in order, as their names were written.
    pub fn fields(&self) -> impl Iterator<Item = (&str, &str)> {
        self.fields
            .iter()
            .map(|f| (&self.text[f.name.range()], &self.text[f.value.range()]))
    }

    /// The text all names and values are slices of, and each field as the
    /// places of its name and value in it: for an encoding that shares the
    /// text rather than copying each value (HTTP/2's).
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn spans(&self) -> impl Iterator<Item = (Range<usize>, Range<usize>)> + '_ {
        self.fields
            .iter()
            .map(|f| (f.name.range(), f.value.range()))
    }

    /// The body is `len` bytes long.
    pub fn length(&mut self, len: u64) -> &mut Self {
        self.framing = Framing::Length(len);
        self
    }
}

impl fmt::Debug for Head {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Head")
            .field("code", &self.code)
            .field("reason", &self.reason())
            .field("fields", &self.fields().collect::<Vec<_>>())
            .field("framing", &self.framing)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(h: &Head) -> Vec<(String, String)> {
        h.fields()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn fields_removed_joined_and_extended() {
        let mut h = Head::new(Status::Ok);
        h.header("Content-Type", "text/plain");
        h.header("Vary", "Accept");
        h.header("content-type", "x/y");
        h.remove("Content-Type");
        h.append_to_list("Vary", "Origin, Cookie");
        h.append_to_list("X-List", "a, b");
        h.header_display("Cache-Control", format_args!("public, max-age={}", 60));
        h.header_display("X-N", 7);
        assert_eq!(
            names(&h),
            [
                ("Vary".to_string(), "Accept, Origin, Cookie".to_string()),
                ("X-List".to_string(), "a, b".to_string()),
                (
                    "Cache-Control".to_string(),
                    "public, max-age=60".to_string()
                ),
                ("X-N".to_string(), "7".to_string()),
            ]
        );
        assert_eq!(h.get("vary"), Some("Accept, Origin, Cookie"));
        // A name that is a prefix of another's is not that field.
        let mut h = Head::new(Status::Ok);
        h.header("Varying", "x");
        h.remove("Vary");
        assert_eq!(h.get("Varying"), Some("x"));
        assert_eq!(h.get("Vary"), None);
    }

    #[test]
    fn reasons() {
        assert_eq!(Head::new(Status::NotFound).reason(), "Not Found");
        assert_eq!(Head::with_code(504, "").reason(), "Gateway Timeout");
        let h = Head::with_code(299, "Mine");
        assert_eq!((h.code(), h.reason()), (299, "Mine"));
        assert_eq!(Head::with_code(299, "").reason(), "");
    }
}
