//! The clients: HTTP/1.1 keep-alive, Connection: close and pipelined,
//! HTTPS with resumed sessions, HTTP/2 (h2c and over TLS) with many
//! streams, the good client, a slowloris and a slow reader. Every
//! response is judged against what the driver wrote.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::ClientConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::check::{Fault, Soak, Verdict};
use crate::http1::{self, Conn, Fail, Resp};
use crate::server::Server;
use crate::site;

pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

#[derive(Clone, Copy, Debug)]
pub enum Item {
    Get(&'static str),
    Range(&'static str),
    Multi(&'static str),
    CondEtag(&'static str),
    CondIms(&'static str),
    Coded(&'static str, &'static str),
    PreGz,
    Listing,
    Cgi,
    Redirect,
    Headers,
    AuthOk,
    AuthBad,
}

impl Item {
    fn path(self) -> &'static str {
        match self {
            Item::Get(p)
            | Item::Range(p)
            | Item::Multi(p)
            | Item::CondEtag(p)
            | Item::CondIms(p)
            | Item::Coded(p, _) => p,
            Item::PreGz => site::PRE,
            Item::Listing => "/list/",
            Item::Cgi => "/cgi-bin/echo.cgi",
            Item::Redirect => "/go/x",
            Item::Headers => site::HDR,
            Item::AuthOk | Item::AuthBad => site::PRIVATE,
        }
    }

    fn kind(self) -> String {
        match self {
            Item::Get(p) if p.starts_with("/t/") => "GET truncated-in-place file".into(),
            Item::Get(p) if p.starts_with("/churn/") => "GET in removed/recreated dir".into(),
            Item::Get(p) if p.starts_with("/m/") => "GET mutable file".into(),
            Item::Get(_) => "GET static file".into(),
            Item::Range(_) => "range".into(),
            Item::Multi(_) => "multipart range".into(),
            Item::CondEtag(_) => "If-None-Match".into(),
            Item::CondIms(_) => "If-Modified-Since".into(),
            Item::Coded(_, c) => format!("Accept-Encoding {c}"),
            Item::PreGz => "precompressed .gz".into(),
            Item::Listing => "directory listing".into(),
            Item::Cgi => "CGI".into(),
            Item::Redirect => "_redirects rule".into(),
            Item::Headers => "_headers rule".into(),
            Item::AuthOk => "basic auth (good)".into(),
            Item::AuthBad => "basic auth (wrong password)".into(),
        }
    }
}

pub fn pick(rng: &mut Rng, auth: bool) -> Item {
    let stat = [
        site::STATIC[0].0,
        site::STATIC[1].0,
        site::STATIC[2].0,
        site::STATIC[3].0,
        site::STATIC[4].0,
    ];
    let muts = [
        site::MUTABLE[0].0,
        site::MUTABLE[1].0,
        site::MUTABLE[2].0,
        site::MUTABLE[3].0,
        site::MUTABLE[4].0,
        site::MUTABLE[5].0,
    ];
    let churn = [site::CHURN[0].0, site::CHURN[1].0, site::CHURN[2].0];
    let both = |r: &mut Rng| {
        if r.below(2) == 0 {
            r.pick(&stat)
        } else {
            r.pick(&muts)
        }
    };
    match rng.below(100) {
        0..=14 => Item::Get(both(rng)),
        15..=19 => Item::Get(site::TRUNC.0),
        20..=24 => Item::Get(rng.pick(&churn)),
        25..=34 => Item::Range(both(rng)),
        35..=39 => Item::Multi(both(rng)),
        40..=46 => Item::CondEtag(both(rng)),
        47..=51 => Item::CondIms(both(rng)),
        52..=63 => Item::Coded(
            rng.pick(&muts),
            rng.pick(&["gzip", "br", "zstd", "br;q=0.5, gzip"]),
        ),
        64..=67 => Item::PreGz,
        68..=71 => Item::Listing,
        72..=74 => Item::Cgi,
        75..=81 => Item::Redirect,
        82..=88 => Item::Headers,
        89..=93 if auth => Item::AuthOk,
        94..=95 if auth => Item::AuthBad,
        _ => Item::Range(site::TRUNC.0),
    }
}

fn b64(input: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in input.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub type Validators = HashMap<&'static str, (Option<String>, Option<String>)>;

/// The request target and fields of `item` with `id`.
fn build(
    soak: &Soak,
    item: Item,
    id: u64,
    rng: &mut Rng,
    v: &Validators,
) -> (String, Vec<(&'static str, String)>) {
    let mut target = format!("{}?id={id}", item.path());
    let mut fields = Vec::new();
    let len = soak.current(item.path()).map_or(1000, |c| c.len()) as u64;
    match item {
        Item::Range(_) => {
            let a = rng.below(len);
            let b = (a + rng.below(20_000)).min(len.saturating_sub(1));
            fields.push(("Range", format!("bytes={a}-{b}")));
        }
        Item::Multi(_) => {
            let a = rng.below(len / 2);
            let b = a + rng.below(len / 4).max(1);
            let c = (b + 10 + rng.below(len / 8)).min(len - 1);
            fields.push(("Range", format!("bytes=0-9,{a}-{b},{c}-,-50")));
        }
        Item::CondEtag(p) => {
            if let Some((Some(e), _)) = v.get(p) {
                fields.push(("If-None-Match", e.clone()));
            }
        }
        Item::CondIms(p) => {
            if let Some((_, Some(lm))) = v.get(p) {
                fields.push(("If-Modified-Since", lm.clone()));
            }
        }
        Item::Coded(_, c) => fields.push(("Accept-Encoding", c.to_string())),
        Item::PreGz => fields.push(("Accept-Encoding", "gzip".into())),
        Item::Redirect => target = format!("/go/x{id}?id={id}"),
        Item::AuthOk => fields.push((
            "Authorization",
            format!(
                "Basic {}",
                b64(format!("{}:{}", site::USER, site::PASSWORD).as_bytes())
            ),
        )),
        Item::AuthBad => fields.push((
            "Authorization",
            format!("Basic {}", b64(format!("{}:wrong", site::USER).as_bytes())),
        )),
        _ => {}
    }
    (target, fields)
}

fn h1_bytes(target: &str, fields: &[(&'static str, String)], close: bool) -> Vec<u8> {
    let mut r = format!("GET {target} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: soak\r\n");
    for (n, v) in fields {
        r.push_str(&format!("{n}: {v}\r\n"));
    }
    if close {
        r.push_str("Connection: close\r\n");
    }
    r.push_str("\r\n");
    r.into_bytes()
}

/// Judges one response to `item`.
#[allow(clippy::too_many_arguments)]
fn judge(
    soak: &Soak,
    server: &str,
    item: Item,
    id: u64,
    fields: &[(&'static str, String)],
    r: &Resp,
    start: Instant,
    end: Instant,
    v: &mut Validators,
) -> Verdict {
    if r.status == 503 {
        return match soak.fault_during(&[Fault::FdExhaustion], server, start, end) {
            Some(_) => Verdict::Explained("FdExhaustion: 503 (out of descriptors)".into()),
            None => Verdict::Bad(format!("503 to {}", item.path())),
        };
    }
    let path = item.path();
    let coding = r.header("content-encoding");
    match item {
        Item::Get(p) | Item::CondEtag(p) | Item::CondIms(p) => {
            let conditional = fields.iter().any(|(n, _)| n.starts_with("If-"));
            if r.status == 304 {
                return if conditional {
                    Verdict::Ok
                } else {
                    Verdict::Bad(format!("{p}: 304 to an unconditional request"))
                };
            }
            if coding.is_some() {
                return Verdict::Bad(format!("{p}: Content-Encoding {coding:?} not asked for"));
            }
            let verdict = soak.check_body(p, r.status, &r.body, r.complete, start, end);
            if matches!(verdict, Verdict::Ok)
                && conditional
                && r.status == 200
                && !p.starts_with("/m/")
                && !p.starts_with("/t/")
                && !p.starts_with("/churn/")
            {
                return Verdict::Bad(format!(
                    "{p}: 200, not 304, to {fields:?} on a file that never changed"
                ));
            }
            if matches!(verdict, Verdict::Ok) && r.status == 200 {
                v.insert(
                    p,
                    (
                        r.header("etag").map(str::to_string),
                        r.header("last-modified").map(str::to_string),
                    ),
                );
            }
            verdict
        }
        Item::Range(p) | Item::Multi(p) => {
            let ctype = r.header("content-type").unwrap_or("").to_string();
            match r.status {
                206 if ctype.starts_with("multipart/byteranges") => {
                    match http1::multipart(&ctype, &r.body) {
                        Ok(parts) => soak.check_range(p, &parts, start, end),
                        Err(e) => {
                            if !r.complete
                                && soak
                                    .fault_during(&[Fault::Truncate], "both", start, end)
                                    .is_some()
                            {
                                Verdict::Explained("expected: short read of a file truncated in place (prefix, then close)".into())
                            } else {
                                Verdict::Bad(format!("{p}: multipart: {e}"))
                            }
                        }
                    }
                }
                206 => {
                    let Some((a, b, total)) =
                        r.header("content-range").and_then(http1::content_range)
                    else {
                        return Verdict::Bad(format!("{p}: 206 without a valid Content-Range"));
                    };
                    if !r.complete {
                        // A range of a file cut while it was sent.
                        let cands = soak.candidates(p, start, end);
                        let ok = cands.iter().any(|c| {
                            c.cut_from.as_ref().is_some_and(|old| {
                                (b as usize) < old.len() && {
                                    let want = &old[a as usize..=b as usize];
                                    r.body.len() <= want.len() && want[..r.body.len()] == r.body[..]
                                }
                            })
                        });
                        return if ok {
                            Verdict::Explained("expected: short read of a file truncated in place (prefix, then close)".into())
                        } else {
                            Verdict::Bad(format!(
                                "{p}: 206 cut short at {} of {}",
                                r.body.len(),
                                b - a + 1
                            ))
                        };
                    }
                    soak.check_range(p, &[(a, b, total, r.body.clone())], start, end)
                }
                200 => soak.check_body(p, 200, &r.body, r.complete, start, end),
                416 => {
                    let cands = soak.candidates(p, start, end);
                    if cands.len() > 1 {
                        Verdict::Explained(
                            "expected: 416 for a range of a file that changed size".into(),
                        )
                    } else {
                        Verdict::Bad(format!("{p}: 416 to {fields:?}"))
                    }
                }
                404 => soak.check_body(p, 404, &r.body, r.complete, start, end),
                s => Verdict::Bad(format!("{p}: status {s} to a range")),
            }
        }
        Item::Coded(p, _) => {
            if r.status == 304 {
                return Verdict::Bad(format!("{p}: 304 to an unconditional request"));
            }
            if !r.complete {
                return Verdict::Bad(format!("{p}: compressed body cut short"));
            }
            match http1::decode(coding, &r.body) {
                Ok(plain) => soak.check_body(p, r.status, &plain, true, start, end),
                Err(e) => Verdict::Bad(format!("{p}: {e}")),
            }
        }
        Item::PreGz => {
            let gz = soak.current("/pre/app.js.gz").expect("recorded");
            if r.status == 200 && coding == Some("gzip") && r.body == *gz {
                Verdict::Ok
            } else {
                Verdict::Bad(format!(
                    "{path}: status {} coding {coding:?}, {} bytes, not the .gz sibling",
                    r.status,
                    r.body.len()
                ))
            }
        }
        Item::Listing => {
            let text = String::from_utf8_lossy(&r.body);
            let missing: Vec<_> = site::LISTED.iter().filter(|n| !text.contains(*n)).collect();
            if r.status == 200 && r.complete && missing.is_empty() {
                Verdict::Ok
            } else {
                Verdict::Bad(format!("listing: status {}, missing {missing:?}", r.status))
            }
        }
        Item::Cgi => {
            let want = format!("cgi ok id={id}\n");
            if r.status == 200 && r.complete && r.body == want.as_bytes() {
                Verdict::Ok
            } else {
                Verdict::Bad(format!(
                    "cgi: status {} body {:?}",
                    r.status,
                    String::from_utf8_lossy(&r.body)
                ))
            }
        }
        Item::Redirect => {
            let Some(loc) = r.header("location") else {
                return Verdict::Bad(format!("redirect: status {} without Location", r.status));
            };
            let want_tail = format!("x{id}?id={id}");
            if r.status != 302 {
                return Verdict::Bad(format!("redirect: status {}", r.status));
            }
            match loc.strip_suffix(&want_tail) {
                Some(prefix) => soak.check_value("#redirects", prefix.as_bytes(), start, end),
                None => Verdict::Bad(format!("redirect: Location {loc}")),
            }
        }
        Item::Headers => {
            let body = soak.check_body(path, r.status, &r.body, r.complete, start, end);
            if !matches!(body, Verdict::Ok) {
                return body;
            }
            match r.header("x-soak-rev") {
                Some(rev) => soak.check_value("#headers", rev.as_bytes(), start, end),
                None => Verdict::Bad("_headers: no X-Soak-Rev".into()),
            }
        }
        Item::AuthOk => soak.check_body(path, r.status, &r.body, r.complete, start, end),
        Item::AuthBad => {
            if r.status == 401
                && r.header("www-authenticate")
                    .is_some_and(|v| v.starts_with("Basic"))
            {
                Verdict::Ok
            } else {
                Verdict::Bad(format!("auth: wrong password got {}", r.status))
            }
        }
    }
}

/// Records one judged response.
fn record(soak: &Soak, transport: &str, item: Item, verdict: Verdict) {
    soak.count(&format!("{transport}: {}", item.kind()));
    match verdict {
        Verdict::Ok => {}
        Verdict::Explained(why) => soak.explained(&why),
        Verdict::Bad(why) => soak.unexplained(&format!("wrong response ({transport})"), why),
    }
}

/// A request that got no (whole) response: explained only by a fault that
/// closes connections, on this server, at this time.
pub fn failed(
    soak: &Soak,
    server: &str,
    transport: &str,
    what: &str,
    fail: &Fail,
    start: Instant,
    reused: bool,
) {
    soak.count(&format!("{transport}: failed"));
    let now = Instant::now();
    if let Some(f) = soak.fault_during(
        &[Fault::RollingRestart, Fault::FdExhaustion],
        server,
        start,
        now,
    ) {
        soak.explained(&format!("{f:?}: {}", fail.label()));
        return;
    }
    let reuse = if reused {
        " (reused keep-alive connection)"
    } else {
        ""
    };
    soak.unexplained(
        &format!("{} ({transport}){reuse}", fail.label()),
        format!("{server} {what}: {}", fail.detail()),
    );
}

pub struct Gauge(Arc<Soak>, usize);
impl Gauge {
    pub fn new(soak: &Arc<Soak>, idx: usize) -> Gauge {
        soak.open[idx].fetch_add(1, Ordering::Relaxed);
        Gauge(soak.clone(), idx)
    }
}
impl Drop for Gauge {
    fn drop(&mut self) {
        self.0.open[self.1].fetch_sub(1, Ordering::Relaxed);
    }
}

/// Connects (and does TLS): a connection, its gauge and what TLS said.
async fn open(
    soak: &Arc<Soak>,
    server: &Server,
    src: IpAddr,
    tls: Option<&Arc<ClientConfig>>,
    transport: &str,
) -> Result<(Conn, Gauge), Fail> {
    let start = Instant::now();
    let tcp = http1::tcp(src, server.port, None).await?;
    let gauge = Gauge::new(soak, server.idx);
    let io: Box<dyn http1::Io> = match tls {
        None => Box::new(tcp),
        Some(cfg) => {
            let (s, info) = http1::tls(tcp, cfg).await?;
            soak.count(&format!(
                "{transport}: TLS {}",
                if info.resumed {
                    "resumed"
                } else {
                    "full handshake"
                }
            ));
            if !info.resumed {
                if let Some(cert) = &info.cert {
                    if let Verdict::Bad(why) =
                        soak.check_value("#cert", cert, start, Instant::now())
                    {
                        soak.unexplained("wrong certificate", why);
                    }
                }
            }
            Box::new(s)
        }
    };
    Ok((Conn::new(io), gauge))
}

#[derive(Clone, Copy, PartialEq)]
pub enum Mode {
    KeepAlive,
    Close,
    Pipeline,
}

/// An HTTP/1.1 client: keep-alive, Connection: close, or 8 pipelined.
#[allow(clippy::too_many_arguments)]
pub async fn h1(
    soak: Arc<Soak>,
    server: Arc<Server>,
    src: IpAddr,
    mode: Mode,
    tls: Option<Arc<ClientConfig>>,
    transport: &'static str,
    pause: Duration,
    seed: u64,
    auth: bool,
) {
    let mut rng = Rng::new(seed);
    let mut v = Validators::new();
    let mut conn: Option<(Conn, Gauge)> = None;
    while !soak.stopping() {
        tokio::time::sleep(pause).await;
        let start = Instant::now();
        if conn.is_none() {
            match open(&soak, &server, src, tls.as_ref(), transport).await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    failed(&soak, server.name, transport, "connect", &e, start, false);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            }
        }
        let (c, _) = conn.as_mut().unwrap();
        let reused = c.served > 0;
        let n = if mode == Mode::Pipeline { 8 } else { 1 };
        let mut batch = Vec::new();
        let mut bytes = Vec::new();
        for _ in 0..n {
            let item = pick(&mut rng, auth);
            let id = soak.id();
            let (target, fields) = build(&soak, item, id, &mut rng, &v);
            bytes.extend(h1_bytes(&target, &fields, mode == Mode::Close));
            batch.push((item, id, target, fields));
        }
        let start = Instant::now();
        if let Err(e) = c.send(&bytes).await {
            failed(
                &soak,
                server.name,
                transport,
                &batch[0].2,
                &e,
                start,
                reused,
            );
            conn = None;
            continue;
        }
        let mut drop_conn = mode == Mode::Close;
        let mut closed_by_server = false;
        for (i, (item, id, target, fields)) in batch.iter().enumerate() {
            if closed_by_server {
                soak.count(&format!(
                    "{transport}: pipelined, unanswered after Connection: close"
                ));
                soak.explained("expected: pipelined requests after the server's Connection: close (a client resends them)");
                continue;
            }
            let r = c.response(false).await;
            let end = Instant::now();
            match r {
                Ok(r) => {
                    soak.answered(*id);
                    let verdict = judge(
                        &soak,
                        server.name,
                        *item,
                        *id,
                        fields,
                        &r,
                        start,
                        end,
                        &mut v,
                    );
                    record(&soak, transport, *item, verdict);
                    if r.close || !r.complete {
                        drop_conn = true;
                        closed_by_server = true;
                    }
                }
                Err(e) => {
                    failed(
                        &soak,
                        server.name,
                        transport,
                        target,
                        &e,
                        start,
                        reused || i > 0,
                    );
                    drop_conn = true;
                    closed_by_server = true;
                }
            }
        }
        if drop_conn {
            conn = None;
        }
    }
}

/// The good client: a small GET every 200 ms on a keep-alive connection,
/// each latency recorded.
pub async fn good(soak: Arc<Soak>, server: Arc<Server>, src: IpAddr) {
    let mut conn: Option<(Conn, Gauge)> = None;
    let mut v = Validators::new();
    let mut next = Instant::now();
    while !soak.stopping() {
        next += Duration::from_millis(200);
        tokio::time::sleep_until(next.into()).await;
        let start = Instant::now();
        if conn.is_none() {
            match open(&soak, &server, src, None, "good client").await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    failed(
                        &soak,
                        server.name,
                        "good client",
                        "connect",
                        &e,
                        start,
                        false,
                    );
                    continue;
                }
            }
        }
        let (c, _) = conn.as_mut().unwrap();
        let reused = c.served > 0;
        let id = soak.id();
        let target = format!("{}?id={id}", site::GOOD);
        let sent = c.send(&h1_bytes(&target, &[], false)).await;
        let r = match sent {
            Ok(()) => c.response(false).await,
            Err(e) => Err(e),
        };
        let end = Instant::now();
        match r {
            Ok(r) => {
                soak.answered(id);
                soak.good.lock().unwrap().push((start, end - start));
                let verdict = judge(
                    &soak,
                    server.name,
                    Item::Get(site::GOOD),
                    id,
                    &[],
                    &r,
                    start,
                    end,
                    &mut v,
                );
                soak.count("good client: GET");
                match verdict {
                    Verdict::Ok => {}
                    Verdict::Explained(w) => soak.explained(&format!("good client: {w}")),
                    Verdict::Bad(w) => soak.unexplained("wrong response (good client)", w),
                }
                if r.close || !r.complete {
                    conn = None;
                }
            }
            Err(e) => {
                failed(
                    &soak,
                    server.name,
                    "good client",
                    &target,
                    &e,
                    start,
                    reused,
                );
                conn = None;
            }
        }
    }
}

type H2Send = hyper::client::conn::http2::SendRequest<Empty<Bytes>>;

async fn h2_open(
    soak: &Arc<Soak>,
    server: &Server,
    src: IpAddr,
    tls: Option<&Arc<ClientConfig>>,
) -> Result<(H2Send, Gauge), Fail> {
    let tcp = http1::tcp(src, server.port, None).await?;
    let gauge = Gauge::new(soak, server.idx);
    let builder = hyper::client::conn::http2::Builder::new(TokioExecutor::new());
    let send = match tls {
        None => {
            let (send, conn) = builder
                .handshake(TokioIo::new(tcp))
                .await
                .map_err(|e| Fail::NoResponse(format!("h2 handshake: {e}")))?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            send
        }
        Some(cfg) => {
            let (s, info) = http1::tls(tcp, cfg).await?;
            if info.alpn.as_deref() != Some(b"h2") {
                return Err(Fail::Malformed("ALPN did not choose h2".into()));
            }
            let (send, conn) = builder
                .handshake(TokioIo::new(s))
                .await
                .map_err(|e| Fail::NoResponse(format!("h2 handshake: {e}")))?;
            tokio::spawn(async move {
                let _ = conn.await;
            });
            send
        }
    };
    Ok((send, gauge))
}

/// HTTP/2 (h2c with prior knowledge, or over TLS): rounds of `streams`
/// concurrent requests on one connection.
#[allow(clippy::too_many_arguments)]
pub async fn h2(
    soak: Arc<Soak>,
    server: Arc<Server>,
    src: IpAddr,
    tls: Option<Arc<ClientConfig>>,
    transport: &'static str,
    streams: usize,
    pause: Duration,
    seed: u64,
    auth: bool,
) {
    let mut rng = Rng::new(seed);
    let v = Arc::new(std::sync::Mutex::new(Validators::new()));
    let mut conn: Option<(H2Send, Gauge)> = None;
    let authority = if tls.is_some() {
        "localhost"
    } else {
        "127.0.0.1"
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    while !soak.stopping() {
        tokio::time::sleep(pause).await;
        let start = Instant::now();
        if conn.as_ref().is_none_or(|(s, _)| s.is_closed()) {
            match h2_open(&soak, &server, src, tls.as_ref()).await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    failed(&soak, server.name, transport, "connect", &e, start, false);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            }
        }
        let send = conn.as_ref().unwrap().0.clone();
        let mut set = tokio::task::JoinSet::new();
        let mut items = Vec::new();
        for _ in 0..streams {
            let mut item = pick(&mut rng, auth);
            if matches!(item, Item::Cgi) && rng.below(3) != 0 {
                item = Item::Get(site::MUTABLE[0].0);
            }
            items.push(item);
        }
        // A file cut under one stream ends the whole connection (a DATA
        // frame's length is sent before its payload is read): the other
        // streams of the round fail with it.
        let cut_round = items.iter().any(|i| i.path() == site::TRUNC.0);
        for item in items {
            let id = soak.id();
            let (target, fields) = build(&soak, item, id, &mut rng, &v.lock().unwrap());
            let mut req = hyper::Request::get(format!("{scheme}://{authority}{target}"));
            for (n, val) in &fields {
                req = req.header(*n, val.as_str());
            }
            let req = req.body(Empty::<Bytes>::new()).expect("a valid request");
            let mut send = send.clone();
            let soak = soak.clone();
            let v = v.clone();
            let name = server.name;
            set.spawn(async move {
                let start = Instant::now();
                let fut = async {
                    let resp = send
                        .send_request(req)
                        .await
                        .map_err(|e| (false, e.to_string()))?;
                    soak.answered(id);
                    let (parts, body) = resp.into_parts();
                    let body = body
                        .collect()
                        .await
                        .map_err(|e| (true, e.to_string()))?
                        .to_bytes();
                    Ok::<_, (bool, String)>((parts, body))
                };
                match tokio::time::timeout(http1::TIMEOUT, fut).await {
                    Ok(Ok((parts, body))) => {
                        let r = Resp {
                            status: parts.status.as_u16(),
                            headers: parts
                                .headers
                                .iter()
                                .map(|(n, v)| {
                                    (
                                        n.to_string(),
                                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                                    )
                                })
                                .collect(),
                            body: body.to_vec(),
                            complete: true,
                            close: false,
                        };
                        let verdict = judge(
                            &soak,
                            name,
                            item,
                            id,
                            &fields,
                            &r,
                            start,
                            Instant::now(),
                            &mut v.lock().unwrap(),
                        );
                        record(&soak, transport, item, verdict);
                    }
                    Ok(Err((_, e))) => {
                        let now = Instant::now();
                        let cut = soak.fault_during(&[Fault::Truncate], "both", start, now);
                        if cut.is_some() && item.path() == site::TRUNC.0 {
                            soak.count(&format!("{transport}: {}", item.kind()));
                            soak.explained("expected: h2 stream cut while its file was truncated in place");
                        } else if cut.is_some() && cut_round {
                            soak.count(&format!("{transport}: failed"));
                            soak.explained(
                                "Truncate: h2 connection closed under a stream of a file truncated in place (its other streams cut with it)",
                            );
                        } else {
                            failed(&soak, name, transport, &target, &Fail::NoResponse(e), start, true);
                        }
                    }
                    Err(_) => failed(
                        &soak,
                        name,
                        transport,
                        &target,
                        &Fail::Timeout("h2 response".into()),
                        start,
                        true,
                    ),
                }
            });
        }
        while set.join_next().await.is_some() {}
    }
}

/// Slowloris: a request head trickled a field line every 2 s; staticd must
/// close it (--read-timeout).
pub async fn slowloris(soak: Arc<Soak>, server: Arc<Server>, src: IpAddr) {
    while !soak.stop_slow.load(Ordering::Relaxed) {
        let start = Instant::now();
        let Ok(mut s) = http1::tcp(src, server.port, None).await else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        let _g = Gauge::new(&soak, server.idx);
        let _ = s
            .write_all(b"GET /slowloris HTTP/1.1\r\nHost: localhost\r\n")
            .await;
        let mut buf = [0u8; 512];
        let mut dropped = false;
        while !soak.stop_slow.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(60) {
            match tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => {
                    dropped = true;
                    break;
                }
                Ok(Ok(_)) => {} // a 408, then the close
                Err(_) => {
                    if s.write_all(b"X-Slow: a\r\n").await.is_err() {
                        dropped = true;
                        break;
                    }
                }
            }
        }
        soak.count("slowloris: connections");
        if dropped {
            soak.explained("expected: slowloris dropped");
            soak.tally.lock().unwrap().notes.push(format!(
                "slowloris dropped after {:.1} s",
                start.elapsed().as_secs_f64()
            ));
        } else if !soak.stop_slow.load(Ordering::Relaxed) {
            soak.unexplained("slowloris not dropped within 60 s", server.name.to_string());
        }
    }
}

/// The state (/proc/net/tcp's `st`) of the server's end of the connection
/// from `client` to port `port`, if the kernel still has it.
fn server_end_state(port: u16, client: std::net::SocketAddr) -> Option<u8> {
    let IpAddr::V4(ip) = client.ip() else {
        return None;
    };
    // /proc/net/tcp writes an IPv4 address as the u32 in host order, in hex.
    let want_rem = format!(
        "{:08X}:{:04X}",
        u32::from_ne_bytes(ip.octets()),
        client.port()
    );
    let want_port = format!(":{port:04X}");
    let text = std::fs::read_to_string("/proc/net/tcp").ok()?;
    text.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 3 && f[1].ends_with(&want_port) && f[2] == want_rem)
            .then(|| u8::from_str_radix(f[3], 16).ok())?
    })
}

/// A slow reader: tiny SO_RCVBUF, reading about 100 B/s of a 2 MB file;
/// staticd must drop it (--send-timeout, --min-rate). The server's close
/// is seen in its socket's state: the kernel still holds what was sent
/// before it (a slow reader would take many minutes to reach the FIN).
pub async fn slow_reader(soak: Arc<Soak>, server: Arc<Server>, src: IpAddr) {
    let (path, _) = site::STATIC[4];
    while !soak.stop_slow.load(Ordering::Relaxed) {
        let start = Instant::now();
        let Ok(mut s) = http1::tcp(src, server.port, Some(2048)).await else {
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        let me = s.local_addr().ok();
        let _g = Gauge::new(&soak, server.idx);
        let id = soak.id();
        let _ = s
            .write_all(format!("GET {path}?id={id} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
            .await;
        let mut got = Vec::new();
        let mut buf = [0u8; 10];
        let mut dropped = None;
        let limit = Duration::from_secs(150);
        let mut checked = Instant::now();
        while !soak.stop_slow.load(Ordering::Relaxed) && start.elapsed() < limit {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => {
                    dropped = Some("connection closed");
                    break;
                }
                Ok(n) => {
                    if got.is_empty() {
                        soak.answered(id);
                    }
                    got.extend_from_slice(&buf[..n]);
                }
            }
            if checked.elapsed() >= Duration::from_secs(1) {
                checked = Instant::now();
                // 1: ESTABLISHED. Anything else: the server closed its end
                // (FIN_WAIT1 while the kernel drains), or it is gone.
                if let Some(me) = me {
                    if server_end_state(server.port, me) != Some(1) {
                        dropped = Some("server closed its end");
                        break;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        soak.count("slow reader: connections");
        // What arrived must be the head, then a prefix of the file.
        let content = soak.current(path).expect("static");
        let ok = match got.windows(4).position(|w| w == b"\r\n\r\n") {
            Some(i) => got.starts_with(b"HTTP/1.1 200") && content.starts_with(&got[i + 4..]),
            None => got.is_empty() || b"HTTP/1.1 200".starts_with(&got[..got.len().min(12)]),
        };
        if !ok {
            soak.unexplained(
                "wrong response (slow reader)",
                format!("{} bytes not a prefix of the response", got.len()),
            );
        }
        if let Some(how) = dropped {
            soak.explained("expected: slow reader dropped");
            soak.tally.lock().unwrap().notes.push(format!(
                "slow reader dropped after {:.1} s ({how}), {} bytes read",
                start.elapsed().as_secs_f64(),
                got.len()
            ));
        } else if !soak.stop_slow.load(Ordering::Relaxed) {
            soak.unexplained(
                "slow reader not dropped within 150 s",
                format!("{} bytes read", got.len()),
            );
        }
    }
}
