//! CGI over HTTP/2: each CGI stream's script runs the same CGI exchange
//! every connection does (`crate::exchange`), in a task of its own with
//! the script's pipes on the runtime. The task and the connection talk by
//! messages: the request body one way (as the client's DATA arrives), the
//! exchange's steps the other (a head, body bytes, the end, or a whole
//! response of ours), which the connection encodes like any other
//! response's, so nothing about CGI (environment, statuses, local
//! redirects, limits, timeouts, the log line, HSTS) is decided a second
//! time for HTTP/2.
//!
//! Script output is held to `h2session::CGI_QUEUE` bytes per stream: the
//! task reads only with credit, which comes back as the connection sends.

use std::collections::HashMap;
use std::io;
use std::process::{ChildStdin, ChildStdout};
use std::sync::Arc;

use tokio::net::unix::pipe;
use tokio::sync::{mpsc, Semaphore};

use crate::exchange::{Context, Exchange, Step};
use crate::h2session::{Connection, Event, Served, CGI_QUEUE};
use crate::respond::CgiJob;
use crate::serve::script_pipes;
use crate::session::{Protocol, Sent};

/// How much script output is read per call.
const CHUNK: usize = 16 << 10;

/// What a script's task tells the connection.
pub(super) enum FromScript {
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
pub(super) struct ScriptLink {
    body: mpsc::UnboundedSender<ToScript>,
    /// Bytes of output the task may read before the connection sent more.
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

/// A connection's CGI streams.
pub(super) struct Scripts {
    served: Arc<Served>,
    links: HashMap<i32, ScriptLink>,
    tx: mpsc::UnboundedSender<(i32, FromScript)>,
    rx: mpsc::UnboundedReceiver<(i32, FromScript)>,
}

impl Scripts {
    pub(super) fn new(served: Arc<Served>) -> Scripts {
        let (tx, rx) = mpsc::unbounded_channel();
        Scripts {
            served,
            links: HashMap::new(),
            tx,
            rx,
        }
    }

    /// Acts on what the connection said about a CGI stream.
    pub(super) fn event(&mut self, event: Event, conn: &mut Connection) {
        match event {
            Event::Cgi { stream, job } => self.start(stream, job, conn),
            Event::Body(stream) => {
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
            Event::Sent { stream, bytes } => {
                if let Some(link) = self.links.get(&stream) {
                    link.credit.add_permits(bytes);
                }
            }
            Event::Gone(stream) => {
                self.links.remove(&stream);
            }
        }
    }

    fn start(&mut self, stream: i32, job: Box<CgiJob>, conn: &mut Connection) {
        let (body, from_conn) = mpsc::unbounded_channel();
        let credit = Arc::new(Semaphore::new(CGI_QUEUE));
        let link = ScriptLink {
            body,
            credit: Arc::clone(&credit),
            ended: false,
        };
        self.links.insert(stream, link);
        let task = Task {
            stream,
            tx: self.tx.clone(),
            from_conn,
            credit,
            stdin: None,
            stdout: None,
            pending: Vec::new(),
            body_done: false,
            out: vec![0; CHUNK],
            held: false,
        };
        tokio::spawn(task.run(job, Arc::clone(&self.served)));
        // Whatever body arrived with the head.
        self.event(Event::Body(stream), conn);
    }

    /// The next message of any script's task; never ready without one.
    pub(super) async fn next(&mut self) -> (i32, FromScript) {
        match self.rx.recv().await {
            Some(message) => message,
            // `self.tx` keeps the channel open.
            None => std::future::pending().await,
        }
    }

    /// Hands a task's message to the connection.
    pub(super) fn apply(&mut self, (stream, message): (i32, FromScript), conn: &mut Connection) {
        match message {
            FromScript::Head(sent) => conn.cgi_head(stream, *sent),
            FromScript::Data(bytes) => conn.cgi_data(stream, &bytes),
            FromScript::End { complete } => conn.cgi_end(stream, complete),
            FromScript::Whole(sent) => conn.cgi_whole(stream, *sent),
            FromScript::Took(n) => conn.consumed(stream, n),
        }
    }
}

/// One stream's script.
struct Task {
    stream: i32,
    tx: mpsc::UnboundedSender<(i32, FromScript)>,
    from_conn: mpsc::UnboundedReceiver<ToScript>,
    credit: Arc<Semaphore>,
    stdin: Option<pipe::Sender>,
    stdout: Option<pipe::Receiver>,
    /// Request body bytes received but not yet taken by the script.
    pending: Vec<u8>,
    /// The request body is complete (or no longer wanted).
    body_done: bool,
    /// The script's output is read into this.
    out: Vec<u8>,
    /// Credit for one read is held.
    held: bool,
}

impl Task {
    async fn run(mut self, job: Box<CgiJob>, served: Arc<Served>) {
        let ctx = Context {
            cfg: &served.cfg,
            site: &served.site,
            client: &served.client,
            sockets: served.sockets,
            kind: served.kind,
            protocol: Protocol::Fields,
        };
        let mut exchange = Exchange::start(job, &ctx);
        self.drive(&mut exchange, &ctx).await;
        // What is left of the script is killed and reaped, which may wait
        // a little: not on the runtime's thread.
        tokio::task::spawn_blocking(move || drop(exchange));
    }

    fn tell(&self, message: FromScript) -> bool {
        self.tx.send((self.stream, message)).is_ok()
    }

    async fn drive(&mut self, exchange: &mut Exchange, ctx: &Context<'_>) {
        loop {
            let told = match exchange.step() {
                Step::Wait => {
                    if self.wait(exchange, ctx).await.is_err() {
                        exchange.client_gone(ctx);
                    }
                    true
                }
                Step::Run { stdin, stdout } => {
                    if self.attach(stdin, stdout).is_err() {
                        exchange.client_gone(ctx);
                    }
                    true
                }
                // Only ever before a head: `Done` follows.
                Step::Send(sent) => {
                    self.tell(FromScript::Whole(sent));
                    return;
                }
                Step::Head(sent) => self.tell(FromScript::Head(sent)),
                Step::Body { bytes, .. } => self.tell(FromScript::Data(bytes)),
                Step::Done { complete, .. } => {
                    self.tell(FromScript::End { complete });
                    return;
                }
            };
            if !told {
                // The connection is gone.
                exchange.client_gone(ctx);
            }
        }
    }

    /// Takes a script's pipes (a local redirect's script replaces the
    /// last's).
    fn attach(&mut self, stdin: Option<ChildStdin>, stdout: ChildStdout) -> io::Result<()> {
        let (stdin, stdout) = script_pipes::attach(stdin, stdout)?;
        self.stdin = stdin;
        self.stdout = Some(stdout);
        Ok(())
    }

    /// Waits for the script's output (with credit to read it), the request
    /// body or the script's room for it, or the deadline, and hands what
    /// came to the exchange. Err: the stream is gone.
    async fn wait(&mut self, exchange: &mut Exchange, ctx: &Context<'_>) -> Result<(), ()> {
        let Some(deadline) = exchange.deadline() else {
            exchange.client_gone(ctx);
            return Ok(());
        };
        if self.credit.is_closed() {
            return Err(());
        }
        let feeding = self.stdin.is_some();
        let receiving = !self.body_done && self.pending.is_empty();
        let reading = self.stdout.is_some();
        tokio::select! {
            permit = self.credit.acquire_many(CHUNK as u32), if reading && !self.held => {
                let Ok(permit) = permit else { return Err(()) };
                permit.forget();
                self.held = true;
            }
            n = script_pipes::read(&mut self.stdout, &mut self.out), if reading && self.held => {
                let n = n.unwrap_or(0);
                // Credit is what the connection may come to hold: give
                // back what the read did not use.
                self.held = false;
                self.credit.add_permits(CHUNK - n);
                if n == 0 {
                    self.stdout = None;
                    self.stdin = None;
                }
                exchange.output(&self.out[..n], n == 0, ctx);
            }
            message = self.from_conn.recv(), if receiving => match message {
                Some(ToScript::Body(bytes)) if feeding => self.pending = bytes,
                Some(ToScript::Body(bytes)) => {
                    // No script input (yet, or any more): its window goes
                    // back all the same.
                    self.tell(FromScript::Took(bytes.len()));
                }
                Some(ToScript::End) | None => {
                    // The body is complete: the script sees its end.
                    self.body_done = true;
                    self.stdin = None;
                }
            },
            written = script_pipes::write(&mut self.stdin, &self.pending), if feeding && !self.pending.is_empty() => {
                match written {
                    Ok(n) => {
                        self.pending.drain(..n);
                        self.tell(FromScript::Took(n));
                    }
                    // The script closed its input early: it wants no more.
                    Err(_) => {
                        self.tell(FromScript::Took(self.pending.len()));
                        self.pending.clear();
                        self.stdin = None;
                    }
                }
            }
            () = tokio::time::sleep_until(deadline.into()) => exchange.timed_out(ctx),
        }
        Ok(())
    }
}
