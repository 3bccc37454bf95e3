//! How sites are really deployed: replicas behind a balancer that must agree on
//! validators, builds that stamp every file with a placeholder mtime (Nix's store,
//! reproducible builds), and releases swapped in by a symlink (Capistrano, CI scripts,
//! Kubernetes' git-sync) while clients are being served. Every test runs in both modes
//! and every cell of the protocol matrix.

#[macro_use]
mod common;

use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant, UNIX_EPOCH};

use common::*;

/// The same site written twice, as two replicas get it from one build: the same bytes
/// and mtimes, but other inodes (and, on real machines, other devices).
fn replica() -> Docroot {
    let root = Docroot::new();
    // An unrelated file first, so that the two roots' inodes do not line up.
    root.file("padding.txt", "p\n");
    root.file("index.html", "the same page\n");
    root.file("big.bin", pattern(100_000));
    root
}

/// Two replicas give the same file the same ETag, and a revalidation made with one's
/// ETag gets 304 from the other, as it would behind a load balancer.
fn replicas_agree_on_validators(v: Variant) {
    let (a, b) = (replica(), Docroot::new());
    b.file("index.html", "the same page\n");
    b.file("big.bin", pattern(100_000));
    let (sa, sb) = (Server::start(v, &a), Server::start(v, &b));
    for path in ["/index.html", "/big.bin"] {
        let (ra, rb) = (sa.get(path), sb.get(path));
        assert_eq!((ra.status, rb.status), (200, 200), "{path}");
        let etag = ra.header("etag").expect("ETag");
        assert_eq!(Some(etag), rb.header("etag"), "{path}: replicas disagree");
        assert_eq!(ra.header("last-modified"), rb.header("last-modified"));
        let again = sb.request("GET", path, &[("If-None-Match", etag)]);
        assert_eq!(again.status, 304, "{path}: {again:#?}");
    }
}

/// A file replaced by one of the same size within the same second gets a new ETag
/// (the nanoseconds of its mtime), where one made of whole seconds and the size (nginx's)
/// would stay the same and a cache would keep the old bytes.
fn a_same_size_replacement_within_the_second_gets_a_new_etag(v: Variant) {
    let root = Docroot::new();
    let path = root.file("a.txt", "version 1\n");
    let second = rfc_example_time();
    set_mtime(&path, second + Duration::from_millis(100));
    let server = Server::start(v, &root);
    let first = server.get("/a.txt");
    let etag = first.header("etag").expect("ETag").to_string();
    fs::write(&path, "version 2\n").unwrap();
    set_mtime(&path, second + Duration::from_millis(700));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let now = server.request("GET", "/a.txt", &[("If-None-Match", &etag)]);
        if now.status == 200 && now.body_str() == "version 2\n" {
            assert_ne!(now.header("etag"), Some(etag.as_str()));
            assert_eq!(now.header("last-modified"), first.header("last-modified"));
            break;
        }
        assert!(Instant::now() < deadline, "still the old version: {now:#?}");
        thread::sleep(Duration::from_millis(100));
    }
}

/// Files whose mtime is a placeholder (0 and 1: Nix, reproducible builds; 1980-01-01:
/// ZIP-based tools) get no Last-Modified, which would make caches keep them for years;
/// an ETag of their bytes still validates, and tells versions apart that have the same
/// size and the same placeholder mtime (every Nix deploy).
fn placeholder_mtimes_get_no_last_modified(v: Variant) {
    let root = Docroot::new();
    let times = [0u64, 1, 315_532_800];
    for (i, secs) in times.iter().enumerate() {
        let path = root.file(&format!("t{i}.js"), format!("console.log({i});\n"));
        set_mtime(&path, UNIX_EPOCH + Duration::from_secs(*secs));
    }
    let big = root.join("big.bin");
    write_pattern_file(&big, 200_000);
    set_mtime(&big, UNIX_EPOCH + Duration::from_secs(1));
    let dated = root.file("dated.txt", "dated\n");
    set_mtime(&dated, UNIX_EPOCH + Duration::from_secs(315_532_801));
    let server = Server::start(v, &root);
    for path in ["/t0.js", "/t1.js", "/t2.js", "/big.bin"] {
        let r = server.get(path);
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("last-modified"), None, "{path}: {:?}", r.headers);
        let etag = r.header("etag").expect("ETag").to_string();
        let inm = server.request("GET", path, &[("If-None-Match", &etag)]);
        assert_eq!(inm.status, 304, "{path}");
        // A date cannot validate what has none: a full response, not a 304.
        let ims = server.request(
            "GET",
            path,
            &[("If-Modified-Since", "Sun, 06 Nov 2094 08:49:37 GMT")],
        );
        assert_eq!(ims.status, 200, "{path}");
        let range = server.request(
            "GET",
            path,
            &[
                ("Range", "bytes=0-3"),
                ("If-Range", "Thu, 01 Jan 1970 00:00:01 GMT"),
            ],
        );
        assert_eq!(range.status, 200, "{path}: If-Range by date must not match");
    }
    let r = server.get("/dated.txt");
    assert_eq!(
        r.header("last-modified"),
        Some("Tue, 01 Jan 1980 00:00:01 GMT")
    );
    // The next deploy: same name, same size, same mtime 1, other bytes.
    let before = server.get("/t1.js").header("etag").unwrap().to_string();
    let path = root.join("t1.js");
    let next = root.join("t1.js.new");
    fs::write(&next, "console.log(9);\n").unwrap();
    set_mtime(&next, UNIX_EPOCH + Duration::from_secs(1));
    fs::rename(&next, &path).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = server.request("GET", "/t1.js", &[("If-None-Match", &before)]);
        if r.status == 200 {
            assert_eq!(r.body_str(), "console.log(9);\n");
            assert_ne!(r.header("etag"), Some(before.as_str()));
            break;
        }
        assert_eq!(r.status, 304);
        assert!(
            Instant::now() < deadline,
            "the new bytes never got a new ETag"
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// `releases/a` and `releases/b` under `dir`, each a whole site saying which it is in
/// every file and in a `_headers` field, and `current` pointing at `releases/a`.
fn releases(dir: &Docroot) -> PathBuf {
    for name in ["a", "b"] {
        let rel = |p: &str| format!("releases/{name}/{p}");
        dir.file(&rel("index.html"), format!("release {name}\n"));
        dir.file(&rel("page.txt"), format!("page of release {name}\n"));
        dir.file(&rel("_headers"), format!("/*\n  X-Release: {name}\n"));
        // Release b has a file a lacks: a's 404 must be a's.
        if name == "b" {
            dir.file(&rel("only-b.txt"), "only in b\n");
        }
        dir.file(&rel("404.html"), format!("not found in release {name}\n"));
    }
    let current = dir.join("current");
    std::os::unix::fs::symlink("releases/a", &current).unwrap();
    current
}

/// Points `current` at `releases/NAME` the way deploy tools do: a new link renamed over
/// the old one, so that the path always names a whole release.
fn swap(current: &Path, name: &str) {
    let next = current.with_extension("next");
    let _ = fs::remove_file(&next);
    std::os::unix::fs::symlink(format!("releases/{name}"), &next).unwrap();
    fs::rename(&next, current).unwrap();
}

/// Asks `path` until the answer comes from release `name`; how long that took.
fn until_release(server: &Server, path: &str, name: &str) -> Duration {
    let start = Instant::now();
    loop {
        let r = server.get(path);
        if r.header("x-release") == Some(name) {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{path} never came from release {name}: {r:#?}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// `--root current` follows `current` when a deploy swaps it: new requests are served
/// from the new release within about a second (each worker looks once a second), with
/// its `_headers` and its `404.html`, without a restart.
fn a_swapped_root_symlink_is_followed(v: Variant) {
    let dir = Docroot::new();
    let current = releases(&dir);
    let server = Server::builder(v, &current).start();
    let r = server.get("/");
    assert_eq!((r.status, r.body_str().as_str()), (200, "release a\n"));
    assert_eq!(r.header("x-release"), Some("a"));
    assert_eq!(server.get("/only-b.txt").status, 404);
    swap(&current, "b");
    let took = until_release(&server, "/page.txt", "b");
    // About a second (a worker's look), with room for a loaded machine: CI runs
    // this beside load tests.
    assert!(took < Duration::from_secs(6), "followed after {took:?}");
    let r = server.get("/only-b.txt");
    assert_eq!((r.status, r.body_str().as_str()), (200, "only in b\n"));
    let missing = server.get("/nothing");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.body_str(), "not found in release b\n");
    swap(&current, "a");
    until_release(&server, "/", "a");
    assert_eq!(server.get("/only-b.txt").status, 404);
}

/// A virtual host's directory that is a symlink (to a release under the root) is
/// followed too when a deploy swaps it.
fn a_swapped_vhost_symlink_is_followed(v: Variant) {
    let dir = Docroot::new();
    releases(&dir);
    let site = dir.join("site.test");
    std::os::unix::fs::symlink("releases/a", &site).unwrap();
    let server = Server::builder(v, dir.path()).arg("--vhosts").start();
    let get =
        |path: &str| server.exchange(format!("GET {path} HTTP/1.1\r\nHost: site.test\r\n\r\n"));
    assert_eq!(get("/").body_str(), "release a\n");
    swap(&site, "b");
    let start = Instant::now();
    loop {
        let r = get("/page.txt");
        if r.body_str() == "page of release b\n" {
            assert_eq!(r.header("x-release"), Some("b"));
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{r:#?}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// What the clients saw while the root was swapped under them.
#[derive(Default)]
struct Tally {
    requests: AtomicU64,
    from_a: AtomicU64,
    from_b: AtomicU64,
    failed: AtomicU64,
    mixed: AtomicU64,
}

/// One response under load: wholly release a or wholly release b (body, `_headers`
/// field), or counted as failed or mixed.
fn judge(r: &HResponse, path: &str, tally: &Tally) {
    tally.requests.fetch_add(1, Ordering::Relaxed);
    let body = r.body_str();
    let field = r.header("x-release").unwrap_or("none");
    let from_body = match (path, body.as_str()) {
        ("/", "release a\n") | ("/page.txt", "page of release a\n") => "a",
        ("/", "release b\n") | ("/page.txt", "page of release b\n") => "b",
        _ => "?",
    };
    if r.status != 200 || from_body == "?" {
        tally.failed.fetch_add(1, Ordering::Relaxed);
        eprintln!("failed: {path}: {} {body:?}", r.status);
    } else if from_body != field {
        tally.mixed.fetch_add(1, Ordering::Relaxed);
        eprintln!("mixed: {path}: body of {from_body}, X-Release {field}");
    } else if from_body == "a" {
        tally.from_a.fetch_add(1, Ordering::Relaxed);
    } else {
        tally.from_b.fetch_add(1, Ordering::Relaxed);
    }
}

/// The root swapped every 50 ms for 2 s, then each release held for 1.2 s, while four
/// keep-alive clients request without pause: no request fails and none mixes two
/// releases (a body of one with the `_headers` of the other), and both are served.
fn swapping_the_root_under_load_fails_and_mixes_nothing(v: Variant) {
    let dir = Docroot::new();
    let current = releases(&dir);
    let server = Server::builder(v, &current).start();
    let tally = Tally::default();
    let done = AtomicBool::new(false);
    let swaps = AtomicU64::new(0);
    let run_for = Duration::from_secs(2);
    thread::scope(|s| {
        for worker in 0..4 {
            let (server, tally, done) = (&server, &tally, &done);
            s.spawn(move || {
                let mut client = None;
                let mut n = 0usize;
                while !done.load(Ordering::Relaxed) {
                    let path = ["/", "/page.txt"][(n + worker) % 2];
                    n += 1;
                    let c = client.get_or_insert_with(|| server.client());
                    match catch_unwind(AssertUnwindSafe(|| c.get(path))) {
                        Ok(r) => judge(&r, path, tally),
                        Err(_) => {
                            // A connection error: counted, and a new connection.
                            tally.requests.fetch_add(1, Ordering::Relaxed);
                            tally.failed.fetch_add(1, Ordering::Relaxed);
                            client = None;
                        }
                    }
                }
            });
        }
        let start = Instant::now();
        let mut name = "a";
        while start.elapsed() < run_for {
            thread::sleep(Duration::from_millis(50));
            name = if name == "a" { "b" } else { "a" };
            swap(&current, name);
            swaps.fetch_add(1, Ordering::Relaxed);
        }
        // Then each release held for longer than a worker's look: both are served
        // (swaps every 50 ms may all be seen on the same side of a look).
        for name in ["b", "a"] {
            swap(&current, name);
            swaps.fetch_add(1, Ordering::Relaxed);
            thread::sleep(Duration::from_millis(1200));
        }
        done.store(true, Ordering::Relaxed);
    });
    let (requests, failed, mixed) = (
        tally.requests.load(Ordering::Relaxed),
        tally.failed.load(Ordering::Relaxed),
        tally.mixed.load(Ordering::Relaxed),
    );
    let (a, b) = (
        tally.from_a.load(Ordering::Relaxed),
        tally.from_b.load(Ordering::Relaxed),
    );
    let line = format!(
        "{v:?}: {requests} requests, {} swaps, {a} from a, {b} from b, {failed} failed, {mixed} mixed",
        swaps.load(Ordering::Relaxed)
    );
    eprintln!("{line}");
    assert_eq!((failed, mixed), (0, 0), "{line}");
    assert!(a > 0 && b > 0, "both releases served: {line}");
    assert!(requests > 20, "{line}");
}

/// A file time past 9999 cannot be written as an HTTP date (four digits of year);
/// tmpfs and btrfs keep such times (ext4 stops at 2446). Such a file is served,
/// validated by an ETag of its bytes, with no Last-Modified. (httpdate panics on
/// such a time: the response was once lost with the connection.)
fn a_file_dated_past_9999_gets_no_last_modified(v: Variant) {
    let shm = Path::new("/dev/shm");
    if !shm.is_dir() {
        return skip("no /dev/shm (tmpfs) to keep a file time past 9999");
    }
    let root = Docroot::new_in(shm);
    let path = root.file("far.txt", "far\n");
    let far = UNIX_EPOCH + Duration::from_secs(253_402_300_801);
    set_mtime(&path, far);
    if fs::metadata(&path).unwrap().modified().unwrap() != far {
        return skip("/dev/shm does not keep a file time past 9999");
    }
    let server = Server::start(v, &root);
    let r = server.get("/far.txt");
    assert_eq!(r.status, 200);
    assert_eq!(r.body_str(), "far\n");
    assert_eq!(r.header("last-modified"), None, "{:?}", r.headers);
    let etag = r.header("etag").expect("ETag").to_string();
    let inm = server.request("GET", "/far.txt", &[("If-None-Match", &etag)]);
    assert_eq!(inm.status, 304);
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    replicas_agree_on_validators,
    a_file_dated_past_9999_gets_no_last_modified,
    a_same_size_replacement_within_the_second_gets_a_new_etag,
    placeholder_mtimes_get_no_last_modified,
    a_swapped_root_symlink_is_followed,
    a_swapped_vhost_symlink_is_followed,
    swapping_the_root_under_load_fails_and_mixes_nothing,
);
