//! CGI over HTTP/2 and HTTP/3: each script's stream runs in a task of its
//! own through the one CGI driver ([`serve::cgi`](crate::serve::cgi)),
//! whose [`Client`] is the task's end of the connection. The task and the
//! connection talk by messages: the request body one way (as the client's
//! DATA arrives), the exchange's steps the other (a head, body bytes, the
//! end, or a whole response of ours), which the connection's session
//! encodes like any other response's, so nothing about CGI (environment,
//! statuses, local redirects, limits, timeouts, the log line, HSTS) is
//! decided a second time for either protocol. They differ only in how a
//! stream is named ([`Streams::Id`]): by its ID in an HTTP/2 connection
//! (whose session implements [`Streams`] here), by its connection and ID
//! in HTTP/3, whose socket's one `Scripts` serves all its connections
//! (`serve::h3::endpoint`).
//!
//! Script output is held to [`CGI_QUEUE`] bytes per stream: the task
//! sends only with credit, which comes back as the connection sends.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use tokio::sync::{mpsc, Semaphore};

use crate::exchange::{Context, StreamEvent, CGI_QUEUE};
use crate::pipeline::{Sent, Served};
use crate::respond::CgiJob;
use crate::serve::cgi::{self, Client, Gone};

/// A connection's session as its scripts' streams need it: HTTP/2's or
/// HTTP/3's.
pub(crate) trait Streams {
    type Id: Copy + Eq + Hash + Send + 'static;
    /// What the connection's streams are served with (a script's
    /// environment: the site, the client).
    fn served(&mut self) -> Arc<Served>;
    /// Moves what arrived of the stream's body into `into`: true once it
    /// is complete and all taken.
    fn take_body(&mut self, id: Self::Id, into: &mut Vec<u8>) -> bool;
    /// The script took `n` bytes of its body.
    fn consumed(&mut self, id: Self::Id, n: usize);
    fn cgi_head(&mut self, id: Self::Id, sent: Sent);
    fn cgi_data(&mut self, id: Self::Id, bytes: &[u8]);
    fn cgi_end(&mut self, id: Self::Id, complete: bool);
    fn cgi_whole(&mut self, id: Self::Id, sent: Sent);
}

#[cfg(feature = "http2")]
impl Streams for crate::h2session::Connection {
    type Id = i32;
    fn served(&mut self) -> Arc<Served> {
        crate::h2session::Connection::served(self)
    }
    fn take_body(&mut self, id: i32, into: &mut Vec<u8>) -> bool {
        self.take_body(id, into)
    }
    fn consumed(&mut self, id: i32, n: usize) {
        self.consumed(id, n)
    }
    fn cgi_head(&mut self, id: i32, sent: Sent) {
        self.cgi_head(id, sent)
    }
    fn cgi_data(&mut self, id: i32, bytes: &[u8]) {
        self.cgi_data(id, bytes)
    }
    fn cgi_end(&mut self, id: i32, complete: bool) {
        self.cgi_end(id, complete)
    }
    fn cgi_whole(&mut self, id: i32, sent: Sent) {
        self.cgi_whole(id, sent)
    }
}

/// What a script's task tells the connection.
pub(crate) enum FromScript {
    Head(Box<Sent>),
    Data(Vec<u8>),
    /// The body is over: whole, or cut (the stream is reset).
    End {
        complete: bool,
    },
    /// A whole response of ours instead (a failure's, a local redirect's).
    Whole(Box<Sent>),
    /// The script took this much of the request body.
    Took(usize),
}

/// What the connection tells a script's task.
enum ToScript {
    Body(Vec<u8>),
    /// The request body is complete.
    End,
}

/// The connection's end of one script's task.
struct ScriptLink {
    body: mpsc::UnboundedSender<ToScript>,
    /// Bytes of output the task may send before the connection sent more.
    credit: Arc<Semaphore>,
    /// The request body's end went to the task.
    ended: bool,
}

impl Drop for ScriptLink {
    fn drop(&mut self) {
        // The stream is gone: the task sees it at its next wait.
        self.credit.close();
    }
}

/// The scripts' streams of a connection, or of every connection a loop
/// drives, named by `Id`.
pub(crate) struct Scripts<Id> {
    links: HashMap<Id, ScriptLink>,
    tx: mpsc::UnboundedSender<(Id, FromScript)>,
    rx: mpsc::UnboundedReceiver<(Id, FromScript)>,
}

impl<Id: Copy + Eq + Hash + Send + 'static> Scripts<Id> {
    pub(crate) fn new() -> Scripts<Id> {
        let (tx, rx) = mpsc::unbounded_channel();
        Scripts {
            links: HashMap::new(),
            tx,
            rx,
        }
    }

    /// Acts on what the connection said about a script's stream.
    pub(crate) fn event<C: Streams<Id = Id>>(&mut self, event: StreamEvent<Id>, conn: &mut C) {
        match event {
            StreamEvent::Cgi { stream, job } => self.start(stream, job, conn),
            StreamEvent::Body(stream) => {
                let Some(link) = self.links.get_mut(&stream) else {
                    return;
                };
                let mut body = Vec::new();
                let ended = conn.take_body(stream, &mut body);
                if !body.is_empty() {
                    let _ = link.body.send(ToScript::Body(body));
                }
                if ended && !link.ended {
                    link.ended = true;
                    let _ = link.body.send(ToScript::End);
                }
            }
            StreamEvent::Sent { stream, bytes } => {
                if let Some(link) = self.links.get(&stream) {
                    link.credit.add_permits(bytes);
                }
            }
            StreamEvent::Gone(stream) => {
                self.links.remove(&stream);
            }
        }
    }

    fn start<C: Streams<Id = Id>>(&mut self, stream: Id, job: Box<CgiJob>, conn: &mut C) {
        let (body, from_conn) = mpsc::unbounded_channel();
        let credit = Arc::new(Semaphore::new(CGI_QUEUE));
        let link = ScriptLink {
            body,
            credit: Arc::clone(&credit),
            ended: false,
        };
        self.links.insert(stream, link);
        let task = StreamClient {
            stream,
            tx: self.tx.clone(),
            from_conn,
            credit,
        };
        tokio::spawn(task.run(job, conn.served()));
        // Whatever body arrived with the head.
        self.event(StreamEvent::Body(stream), conn);
    }

    /// The next message of any script's task; never ready without one.
    pub(crate) async fn next(&mut self) -> (Id, FromScript) {
        match self.rx.recv().await {
            Some(message) => message,
            // `self.tx` keeps the channel open.
            None => std::future::pending().await,
        }
    }

    /// Hands a task's message to the connection.
    pub(crate) fn apply<C: Streams<Id = Id>>(
        &mut self,
        (stream, message): (Id, FromScript),
        conn: &mut C,
    ) {
        match message {
            FromScript::Head(sent) => conn.cgi_head(stream, *sent),
            FromScript::Data(bytes) => conn.cgi_data(stream, &bytes),
            FromScript::End { complete } => conn.cgi_end(stream, complete),
            FromScript::Whole(sent) => conn.cgi_whole(stream, *sent),
            FromScript::Took(n) => conn.consumed(stream, n),
        }
    }
}

/// One stream's end of the connection, as the client of its exchange.
struct StreamClient<Id> {
    stream: Id,
    tx: mpsc::UnboundedSender<(Id, FromScript)>,
    from_conn: mpsc::UnboundedReceiver<ToScript>,
    credit: Arc<Semaphore>,
}

impl<Id: Copy + Send + 'static> StreamClient<Id> {
    async fn run(mut self, job: Box<CgiJob>, served: Arc<Served>) {
        let ctx = Context {
            cfg: &served.cfg,
            site: &served.site,
            origin: &served.origin,
        };
        let (_, exchange) = cgi::run(job, &ctx, &mut self, std::future::pending()).await;
        // What is left of the script is killed and reaped, which may wait
        // a little: not on the runtime's thread.
        tokio::task::spawn_blocking(move || drop(exchange));
    }

    fn tell(&self, message: FromScript) -> Result<(), Gone> {
        self.tx.send((self.stream, message)).map_err(|_| Gone)
    }
}

impl<Id: Copy + Send + 'static> Client for StreamClient<Id> {
    async fn body(&mut self) -> Result<Option<Vec<u8>>, Gone> {
        match self.from_conn.recv().await {
            Some(ToScript::Body(bytes)) => Ok(Some(bytes)),
            Some(ToScript::End) => Ok(None),
            // The stream is gone (its link dropped).
            None => Err(Gone),
        }
    }

    fn took(&mut self, n: usize) {
        let _ = self.tell(FromScript::Took(n));
    }

    async fn whole(&mut self, sent: Box<Sent>) -> Result<(), Gone> {
        self.tell(FromScript::Whole(sent))
    }

    async fn head(&mut self, sent: Box<Sent>, _body: bool) -> Result<(), Gone> {
        self.tell(FromScript::Head(sent))
    }

    /// Waits for credit first: the connection holds at most
    /// [`CGI_QUEUE`] bytes of a stream's output, and gives credit back as
    /// it sends them.
    async fn data(&mut self, bytes: Vec<u8>) -> Result<(), Gone> {
        let permit = self.credit.acquire_many(bytes.len() as u32).await;
        permit.map_err(|_| Gone)?.forget();
        self.tell(FromScript::Data(bytes))
    }

    async fn end(&mut self, complete: bool) -> Result<(), Gone> {
        self.tell(FromScript::End { complete })
    }
}
