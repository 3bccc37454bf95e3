//! URL -> file mapping: directories, index files, path safety, symlinks, dotfiles, special
//! files and permissions. Every test runs in both modes.

#[macro_use]
mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use common::*;

fn site() -> Docroot {
    let root = Docroot::new();
    root.file("a.txt", "alpha\n");
    root.file("index.html", "<h1>root</h1>\n");
    root.file("sub/index.html", "<h1>sub</h1>\n");
    root.file("sub/a.txt", "sub alpha\n");
    root.dir("empty");
    root.file("back\\slash.txt", "backslash\n");
    root.file("with space.txt", "space\n");
    root.file(".hidden", "hidden\n");
    root.file(".git/config", "git config\n");
    root.file("sub/.env", "env\n");
    root.file(".well-known/x", "well known\n");
    root
}

/// A directory outside the docroot holding a file whose content must never be served.
struct Secret {
    dir: tempfile::TempDir,
    marker: String,
}

impl Secret {
    fn new() -> Secret {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let marker = format!("TOPSECRET-{}", std::process::id());
        fs::write(dir.path().join("secret.txt"), &marker).unwrap();
        Secret { dir, marker }
    }

    fn file(&self) -> std::path::PathBuf {
        self.dir.path().join("secret.txt")
    }

    /// `../<secret dir name>/secret.txt` as seen from a sibling temp dir.
    fn relative_from(&self, root: &Path) -> String {
        assert_eq!(
            root.parent(),
            self.dir.path().parent(),
            "both in the temp dir"
        );
        format!(
            "../{}/secret.txt",
            self.dir.path().file_name().unwrap().to_str().unwrap()
        )
    }
}

/// One GET on a fresh connection (some answers close the connection); over HTTP/2 in the
/// HTTP/2 cells.
fn get_raw(server: &Server, target: &str) -> Response {
    server.exchange(request("GET", target, &[]))
}

fn assert_status_for_all(server: &Server, targets: &[&str], code: u16) {
    for target in targets {
        let resp = get_raw(server, target);
        assert_eq!(resp.status, code, "GET {target} -> {resp:#?}");
        if code >= 400 {
            assert_error(&resp, code);
        }
    }
}

// --- directories -----------------------------------------------------------------------

fn directory_without_slash_redirects(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = get_raw(&server, "/sub");
    assert_eq!(resp.status, 301);
    assert_eq!(resp.header("location"), Some("/sub/"));
    assert_eq!(resp.content_length(), Some(resp.body.len() as u64));
    assert_common_headers(&resp);
}

fn directory_redirect_keeps_query(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = get_raw(&server, "/sub?x=1&y=2");
    assert_eq!(resp.status, 301);
    assert_eq!(resp.header("location"), Some("/sub/?x=1&y=2"));
}

fn directory_with_slash_serves_index_like_the_file(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let dir = server.get("/sub/");
    let file = server.get("/sub/index.html");
    assert_eq!(dir.status, 200);
    assert_eq!(dir.body, b"<h1>sub</h1>\n");
    for name in [
        "content-type",
        "content-length",
        "last-modified",
        "etag",
        "accept-ranges",
    ] {
        assert_eq!(dir.header(name), file.header(name), "{name}");
    }
    assert_eq!(
        dir.header("content-type").map(str::to_ascii_lowercase),
        Some("text/html; charset=utf-8".into())
    );
}

fn root_serves_its_index(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_eq!(server.get("/").body, b"<h1>root</h1>\n");
}

fn directory_without_index_gets_404(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_error(&get_raw(&server, "/empty/"), 404);
}

fn custom_index_name_is_used(v: Variant) {
    let root = site();
    root.file("home.htm", "<h1>home</h1>\n");
    let server = Server::builder(v, root.path())
        .args(["--index", "home.htm"])
        .start();
    assert_eq!(server.get("/").body, b"<h1>home</h1>\n");
    assert_error(&get_raw(&server, "/sub/"), 404);
}

fn index_names_are_tried_in_order(v: Variant) {
    let root = site();
    root.file("b.html", "root b\n");
    root.file("both/a.html", "both a\n");
    root.file("both/b.html", "both b\n");
    let server = Server::builder(v, root.path())
        .args(["--index", "a.html,b.html"])
        .start();
    assert_eq!(
        server.get("/").body,
        b"root b\n",
        "falls back to the second name"
    );
    assert_eq!(
        server.get("/both/").body,
        b"both a\n",
        "the first name wins"
    );
    assert_error(&get_raw(&server, "/sub/"), 404);
}

// --- path safety -----------------------------------------------------------------------

fn dotdot_above_root_gets_400(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_status_for_all(
        &server,
        &["/../a.txt", "/../../../../etc/passwd", "/sub/../../a.txt"],
        400,
    );
}

fn percent_encoded_dotdot_gets_400(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_status_for_all(
        &server,
        &["/%2e%2e/a.txt", "/%2E%2E/%2e%2e/etc/passwd", "/.%2e/a.txt"],
        400,
    );
}

fn dotdot_with_encoded_slash_gets_400(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_status_for_all(
        &server,
        &[
            "/..%2fa.txt",
            "/..%2f..%2fetc%2fpasswd",
            "/sub/..%2F..%2Fa.txt",
        ],
        400,
    );
}

fn dotdot_inside_root_is_resolved(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    for target in ["/sub/../a.txt", "/sub/%2e%2e/a.txt"] {
        let resp = get_raw(&server, target);
        assert_eq!(resp.status, 200, "{target}");
        assert_eq!(resp.body, b"alpha\n", "{target}");
    }
}

fn double_slashes_collapse_and_stay_in_root(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_eq!(get_raw(&server, "//a.txt").body, b"alpha\n");
    assert_eq!(get_raw(&server, "/sub//a.txt").body, b"sub alpha\n");
    let resp = get_raw(&server, "//etc/passwd");
    assert_error(&resp, 404);
    assert!(!resp.body_str().contains("root:"), "served /etc/passwd");
}

fn backslash_is_an_ordinary_byte(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    for target in ["/back\\slash.txt", "/back%5Cslash.txt"] {
        let resp = get_raw(&server, target);
        assert_eq!(resp.status, 200, "{target}");
        assert_eq!(resp.body, b"backslash\n");
    }
    // Not a separator: these name no file (and a leading `.` makes them dotfiles).
    for target in [
        "/sub\\a.txt",
        "/..\\a.txt",
        "/..%5Ca.txt",
        "/\\..\\..\\etc\\passwd",
    ] {
        let resp = get_raw(&server, target);
        assert_error(&resp, 404);
    }
}

fn nul_byte_gets_400(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_status_for_all(&server, &["/a.txt%00", "/a.txt%00.html", "/%00"], 400);
}

fn bad_percent_escape_gets_400(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_status_for_all(&server, &["/a%zz.txt", "/a.txt%2", "/a.txt%", "/%g0"], 400);
}

fn percent_encoded_names_are_decoded(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_eq!(get_raw(&server, "/with%20space.txt").body, b"space\n");
    assert_eq!(get_raw(&server, "/%61.txt").body, b"alpha\n");
}

fn query_is_stripped(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    for target in ["/a.txt?x=1&y=2", "/a.txt?/../../etc/passwd", "/a.txt?"] {
        let resp = get_raw(&server, target);
        assert_eq!(resp.status, 200, "{target}");
        assert_eq!(resp.body, b"alpha\n");
    }
}

// --- symlinks, dotfiles, special files -------------------------------------------------

/// Serves a docroot with `link` pointing at `target`, and checks that every request
/// through the link gets a 404 that carries none of the secret.
fn assert_symlink_escape_refused(v: Variant, secret: &Secret, target: &Path, paths: &[&str]) {
    let root = site();
    root.symlink("link", target);
    let server = Server::start(v, &root);
    for path in paths {
        for extra in [&[][..], &["Range: bytes=0-5"][..]] {
            let resp = server.exchange(request("GET", path, extra));
            let leaked =
                contains(&resp.body, secret.marker.as_bytes()) || contains(&resp.body, b"TOPSEC");
            assert!(!leaked, "{path} leaked the secret");
            assert_error(&resp, 404);
        }
    }
}

fn absolute_symlink_out_of_root_gets_404(v: Variant) {
    let secret = Secret::new();
    assert_symlink_escape_refused(v, &secret, &secret.file(), &["/link"]);
}

fn relative_symlink_out_of_root_gets_404(v: Variant) {
    let secret = Secret::new();
    let probe = Docroot::new();
    let relative = secret.relative_from(probe.path());
    assert_symlink_escape_refused(v, &secret, Path::new(&relative), &["/link"]);
}

fn symlinked_directory_out_of_root_gets_404(v: Variant) {
    let secret = Secret::new();
    assert_symlink_escape_refused(
        v,
        &secret,
        secret.dir.path(),
        &["/link/secret.txt", "/link/"],
    );
}

fn symlink_inside_root_is_followed(v: Variant) {
    let root = site();
    root.symlink("link.txt", "a.txt");
    root.symlink("sub/up.txt", "../a.txt");
    root.symlink("linkdir", "sub");
    let server = Server::start(v, &root);
    assert_eq!(server.get("/link.txt").body, b"alpha\n");
    assert_eq!(server.get("/sub/up.txt").body, b"alpha\n");
    assert_eq!(server.get("/linkdir/a.txt").body, b"sub alpha\n");
}

fn dotfiles_get_404(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    for target in [
        "/.hidden",
        "/.git/config",
        "/.git/",
        "/sub/.env",
        "/%2ehidden",
    ] {
        let resp = get_raw(&server, target);
        assert_error(&resp, 404);
    }
}

fn well_known_is_served(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    let resp = server.get("/.well-known/x");
    assert_eq!(resp.status, 200);
    assert_eq!(resp.body, b"well known\n");
}

fn fifo_gets_403_without_hanging(v: Variant) {
    let root = site();
    root.fifo("pipe");
    let server = Server::start(v, &root);
    let mut conn = server.connect();
    assert_error(&conn.roundtrip(request("GET", "/pipe", &[])), 403);
    // The connection is still usable: the server did not block on the FIFO.
    assert_eq!(conn.roundtrip(request("GET", "/a.txt", &[])).status, 200);
}

fn unreadable_file_gets_403(v: Variant) {
    let root = site();
    let locked = root.file("locked.txt", "locked\n");
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    // As root the server could read anything; run it as nobody (uid/gid 65534).
    let server = Server::builder(v, root.path()).unprivileged().start();
    let mut conn = server.connect();
    let resp = conn.roundtrip(request("GET", "/locked.txt", &[]));
    assert_error(&resp, 403);
    assert_eq!(
        conn.roundtrip(request("GET", "/a.txt", &[])).body,
        b"alpha\n"
    );
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    directory_without_slash_redirects,
    directory_redirect_keeps_query,
    directory_with_slash_serves_index_like_the_file,
    root_serves_its_index,
    directory_without_index_gets_404,
    custom_index_name_is_used,
    index_names_are_tried_in_order,
    dotdot_above_root_gets_400,
    percent_encoded_dotdot_gets_400,
    dotdot_with_encoded_slash_gets_400,
    dotdot_inside_root_is_resolved,
    double_slashes_collapse_and_stay_in_root,
    backslash_is_an_ordinary_byte,
    nul_byte_gets_400,
    bad_percent_escape_gets_400,
    percent_encoded_names_are_decoded,
    query_is_stripped,
    absolute_symlink_out_of_root_gets_404,
    relative_symlink_out_of_root_gets_404,
    symlinked_directory_out_of_root_gets_404,
    symlink_inside_root_is_followed,
    dotfiles_get_404,
    well_known_is_served,
    fifo_gets_403_without_hanging,
    unreadable_file_gets_403,
);
