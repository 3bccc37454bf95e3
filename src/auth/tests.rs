use std::sync::Mutex;

use super::*;

// Made with Apache's htpasswd (see htpasswd.rs's tests).
const ALICE: &str = "alice:$2y$04$NyCJjL9f28.T9MaSU4P/xuzh84p2ka/GPsteiJqQlV9a3HUuepmEi\n"; // correct horse
const BOB: &str = "bob:$apr1$WNU5/TRs$f.pwrh2Sr3wmOapxmfjiM/\n"; // hunter2
const BOB_SHA256: &str = "bob:$5$mYGLTjcyIOp3366B$r5SxrHEkqKPVj.xUHXz/LWgBqsotbBQb9aAyuLaJDh1\n"; // s3cret:with:colons

/// `Basic base64(user:password)`, from a table of known encodings: the
/// tests do not encode with the code under test.
fn basic(user_password: &str) -> &'static [u8] {
    match user_password {
        "alice:correct horse" => b"Basic YWxpY2U6Y29ycmVjdCBob3JzZQ==",
        "alice:wrong" => b"Basic YWxpY2U6d3Jvbmc=",
        "bob:hunter2" => b"Basic Ym9iOmh1bnRlcjI=",
        "bob:s3cret:with:colons" => b"Basic Ym9iOnMzY3JldDp3aXRoOmNvbG9ucw==",
        "mallory:hunter2" => b"Basic bWFsbG9yeTpodW50ZXIy",
        other => panic!("no encoding for {other}"),
    }
}

fn memory(areas: &[(&str, &str)]) -> Auth {
    let areas: Vec<(&str, &[u8])> = areas.iter().map(|(p, t)| (*p, t.as_bytes())).collect();
    Auth::from_memory(&areas, &mut |_| {}).unwrap()
}

fn granted(user: &str) -> Check<'static> {
    Check::Granted { user: user.into() }
}

#[test]
fn prefixes_cover_themselves_and_below() {
    let auth = memory(&[("/private", ALICE)]);
    let denied = Check::Denied { realm: "/private" };
    for path in ["/private", "/private/", "/private/a/b.html"] {
        assert_eq!(auth.check(path, None), denied, "{path}");
    }
    for path in ["/", "/privateer", "/privat", "/public/private", "/Private"] {
        assert_eq!(auth.check(path, None), Check::Open, "{path}");
    }
}

#[test]
fn longest_prefix_wins_and_trailing_slashes_do_not_matter() {
    let auth = memory(&[("/", BOB), ("/docs/", ALICE), ("/docs/internal", BOB)]);
    let realm = |path| match auth.check(path, None) {
        Check::Denied { realm } => realm.to_string(),
        other => panic!("{path}: {other:?}"),
    };
    assert_eq!(realm("/"), "/");
    assert_eq!(realm("/index.html"), "/");
    assert_eq!(realm("/docs"), "/docs");
    assert_eq!(realm("/docs/a"), "/docs");
    assert_eq!(realm("/docs/internal/x"), "/docs/internal");
    assert_eq!(realm("/docs/internals"), "/docs");
    assert_eq!(
        auth.check("/docs/a", Some(basic("alice:correct horse"))),
        granted("alice")
    );
    assert_eq!(
        auth.check("/docs/internal/x", Some(basic("alice:correct horse"))),
        Check::Denied {
            realm: "/docs/internal"
        },
        "alice is not in the inner area's file"
    );
    assert_eq!(
        auth.check("/docs/internal/x", Some(basic("bob:hunter2"))),
        granted("bob")
    );
}

#[test]
fn prefix_mistakes_are_errors() {
    let err = |areas: &[(&str, &[u8])]| Auth::from_memory(areas, &mut |_| {}).err().unwrap();
    assert!(err(&[("private", b"")]).contains("does not start with /"));
    assert!(err(&[("/a", b""), ("/a/", b"")]).contains("/a is given twice"));
}

#[test]
fn realm_is_escaped_for_a_quoted_string() {
    let auth = memory(&[("/a\"b\\c", ALICE)]);
    assert_eq!(
        auth.check("/a\"b\\c/x", None),
        Check::Denied {
            realm: "/a\\\"b\\\\c"
        }
    );
}

#[test]
fn credentials_checked() {
    let auth = memory(&[("/p", &format!("{ALICE}{BOB}eve:plain\n"))]);
    let denied = Check::Denied { realm: "/p" };
    assert_eq!(
        auth.check("/p", Some(basic("alice:correct horse"))),
        granted("alice")
    );
    assert_eq!(
        auth.check("/p/x", Some(basic("bob:hunter2"))),
        granted("bob")
    );
    for bad in [
        basic("alice:wrong"),
        basic("mallory:hunter2"),
        b"Basic ZXZlOnBsYWlu", // eve:plain, a refused line
        b"Bearer YWxpY2U6Y29ycmVjdCBob3JzZQ==",
        b"Basic",
        b"",
    ] {
        assert_eq!(
            auth.check("/p", Some(bad)),
            denied,
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn unknown_users_cost_a_verification_too() {
    let auth = memory(&[("/p", BOB)]);
    auth.check("/p", Some(basic("mallory:hunter2")));
    assert_eq!(auth.verifications(), 1);
    auth.check("/p", Some(b"Basic ZXZlOnBsYWlu"));
    assert_eq!(auth.verifications(), 2);
}

#[test]
fn verified_credentials_are_cached_failures_are_not() {
    let auth = memory(&[("/p", ALICE)]);
    let good = Some(basic("alice:correct horse"));
    assert_eq!(auth.check("/p", good), granted("alice"));
    assert_eq!(auth.verifications(), 1);
    for _ in 0..3 {
        assert_eq!(auth.check("/p/x", good), granted("alice"));
    }
    assert_eq!(auth.verifications(), 1, "hits pay no bcrypt");
    for n in 2..4 {
        let wrong = auth.check("/p", Some(basic("alice:wrong")));
        assert_eq!(wrong, Check::Denied { realm: "/p" });
        assert_eq!(auth.verifications(), n, "a failure is verified every time");
    }
}

#[test]
fn a_cached_success_counts_only_in_its_own_area() {
    let auth = memory(&[("/a", BOB), ("/b", BOB_SHA256)]);
    assert_eq!(auth.check("/a", Some(basic("bob:hunter2"))), granted("bob"));
    assert_eq!(
        auth.check("/b", Some(basic("bob:hunter2"))),
        Check::Denied { realm: "/b" }
    );
    assert_eq!(
        auth.check("/b", Some(basic("bob:s3cret:with:colons"))),
        granted("bob")
    );
}

/// An Auth on real files, re-checked at every request, with its reports.
struct Fixture {
    dir: tempfile::TempDir,
    auth: Auth,
    reports: Arc<Mutex<Vec<String>>>,
}

fn on_file(text: &str) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("htpasswd");
    fs::write(&file, text).unwrap();
    let reports = Arc::new(Mutex::new(Vec::new()));
    let sink = reports.clone();
    let report = Box::new(move |m: &str| sink.lock().unwrap().push(m.to_string()));
    let areas = [AuthArea {
        prefix: "/p".into(),
        file,
    }];
    let auth = Auth::load_reporting(&areas, &mut |_| {}, report, Duration::ZERO).unwrap();
    Fixture { dir, auth, reports }
}

impl Fixture {
    fn file(&self) -> PathBuf {
        self.dir.path().join("htpasswd")
    }

    fn check(&self, who: &str) -> Check<'_> {
        self.auth.check("/p/x", Some(basic(who)))
    }

    fn reports(&self) -> Vec<String> {
        std::mem::take(&mut *self.reports.lock().unwrap())
    }
}

#[test]
fn a_changed_file_is_read_again() {
    let f = on_file(BOB);
    assert_eq!(f.check("bob:hunter2"), granted("bob"));
    assert!(f.reports().is_empty(), "unchanged: not read again");
    fs::write(f.file(), format!("{BOB_SHA256}{ALICE}")).unwrap();
    assert_eq!(
        f.check("bob:hunter2"),
        Check::Denied { realm: "/p" },
        "the cached success is for the old file"
    );
    assert_eq!(f.check("bob:s3cret:with:colons"), granted("bob"));
    assert_eq!(f.check("alice:correct horse"), granted("alice"));
    let reports = f.reports();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(
        reports[0].ends_with("htpasswd: read again, 2 users"),
        "{reports:?}"
    );
}

#[test]
fn problems_in_a_changed_file_are_reported() {
    let f = on_file(BOB);
    fs::write(f.file(), "bob:{SHA}EfatjsUqKYSrqv18O1FlA3hcIHI=\n").unwrap();
    assert_eq!(f.check("bob:hunter2"), Check::Denied { realm: "/p" });
    let reports = f.reports();
    assert_eq!(reports.len(), 2, "{reports:?}");
    assert!(reports[0].starts_with("warning: "), "{reports:?}");
    assert!(
        reports[0].contains("htpasswd:1: user \"bob\": an unsalted SHA-1"),
        "{reports:?}"
    );
}

#[test]
fn an_unreadable_file_refuses_everyone_until_it_is_back() {
    let f = on_file(BOB);
    assert_eq!(f.check("bob:hunter2"), granted("bob"));
    fs::remove_file(f.file()).unwrap();
    for _ in 0..3 {
        assert_eq!(f.check("bob:hunter2"), Check::Denied { realm: "/p" });
    }
    let reports = f.reports();
    assert_eq!(reports.len(), 1, "reported once: {reports:?}");
    assert!(reports[0].contains("No such file"), "{reports:?}");
    assert!(
        reports[0].contains("everyone is refused under /p"),
        "{reports:?}"
    );
    fs::write(f.file(), BOB).unwrap();
    assert_eq!(f.check("bob:hunter2"), granted("bob"));
    let reports = f.reports();
    assert!(
        reports[0].ends_with("readable again, 1 users"),
        "{reports:?}"
    );
}

#[test]
fn start_up_errors_and_warnings_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let area = |file: PathBuf| AuthArea {
        prefix: "/p".into(),
        file,
    };
    let missing = dir.path().join("missing");
    let err = Auth::load(&[area(missing.clone())], &mut |_| {})
        .err()
        .unwrap();
    assert_eq!(
        err,
        format!("htpasswd {}: No such file or directory", missing.display())
    );
    let err = Auth::load(&[area(dir.path().to_path_buf())], &mut |_| {})
        .err()
        .unwrap();
    assert!(err.ends_with("not a regular file"), "{err}");

    let file = dir.path().join("pw");
    fs::write(&file, "gina:plain\n").unwrap();
    let mut warnings = Vec::new();
    Auth::load(&[area(file.clone())], &mut |w| warnings.push(w.to_string())).unwrap();
    let name = file.display();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].starts_with(&format!("{name}:1: user \"gina\"")),
        "{warnings:?}"
    );
    assert_eq!(
        warnings[1],
        format!("htpasswd {name}: no user can log in: everyone is refused under /p")
    );
}

#[test]
fn checks_from_many_threads() {
    let auth = memory(&[("/p", &format!("{ALICE}{BOB}"))]);
    std::thread::scope(|s| {
        for i in 0..4 {
            let auth = &auth;
            s.spawn(move || {
                for _ in 0..20 {
                    let (who, user) = if i % 2 == 0 {
                        ("alice:correct horse", "alice")
                    } else {
                        ("bob:hunter2", "bob")
                    };
                    assert_eq!(auth.check("/p", Some(basic(who))), granted(user));
                }
            });
        }
    });
    assert!(auth.verifications() <= 4, "{}", auth.verifications());
}
