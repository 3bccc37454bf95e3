//! Directory listings (`--listing`): HTML5 and JSON, ordering (by query), escaping,
//! validators. Every test runs in both modes.

#[macro_use]
mod common;

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;

/// Funny name: must be HTML-escaped in the text and %-encoded in the href.
const FUNNY: &str = "a <&>.txt";

/// `/d/` with two directories, three files (one with a funny name) and a hidden file.
/// `b.txt` is the newest entry; the directory itself is older.
fn site() -> Docroot {
    let root = Docroot::new();
    root.file("d/b.txt", "bee");
    root.file(format!("d/{FUNNY}").as_str(), "funny!");
    root.file("d/Z.txt", "zed zed");
    root.file("d/.hidden", "secret");
    root.file("d/sub/inner.txt", "inner");
    root.dir("d/abc");
    set_mtime(&root.join("d/b.txt"), newest());
    for dir in ["d/sub", "d/abc", "d"] {
        set_dir_mtime(&root.join(dir), rfc_example_time());
    }
    root
}

fn newest() -> SystemTime {
    rfc_example_time() + Duration::from_secs(1000)
}

fn set_dir_mtime(dir: &Path, when: SystemTime) {
    fs::File::open(dir).unwrap().set_modified(when).unwrap();
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_secs()
}

fn listing_server(v: Variant, root: &Docroot) -> Server {
    Server::builder(v, root.path()).arg("--listing").start()
}

/// The table body: the entries' rows, without the sorting links in the head.
fn tbody(page: &str) -> &str {
    let start = page.find("<tbody>").expect("<tbody>");
    let end = page.find("</tbody>").expect("</tbody>");
    &page[start..end]
}

/// Every `<a href="HREF">TEXT</a>` of the entries, in order, as written (still escaped).
fn entry_anchors(page: &str) -> Vec<(String, String)> {
    anchors(tbody(page))
}

/// Every `<a href="HREF">TEXT</a>` in the page, in order, as written (still escaped).
fn anchors(page: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = page;
    while let Some(start) = rest.find("<a href=\"") {
        rest = &rest[start + "<a href=\"".len()..];
        let href_end = rest.find('"').expect("closing quote of href");
        let href = rest[..href_end].to_string();
        rest = &rest[href_end..];
        let text_start = rest.find('>').expect("end of <a> tag") + 1;
        let text_end = rest.find("</a>").expect("</a>");
        out.push((href, rest[text_start..text_end].to_string()));
        rest = &rest[text_end..];
    }
    out
}

fn html_unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&amp;", "&")
}

fn percent_decode(s: &str) -> Vec<u8> {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
            out.push(u8::from_str_radix(hex, 16).expect("hex escape"));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// The page text between the anchor for `href` and the next anchor, with tags removed.
fn row_text(page: &str, href: &str) -> String {
    let start = page
        .find(&format!("<a href=\"{href}\""))
        .unwrap_or_else(|| panic!("no anchor {href:?} in {page}"));
    let after = &page[start..];
    let after = &after[after.find("</a>").unwrap() + 4..];
    let end = after.find("<a href=").unwrap_or(after.len());
    let mut text = String::new();
    let mut in_tag = false;
    for c in after[..end].chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                text.push(' ');
            }
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text
}

fn get_listing(server: &Server, path: &str) -> HResponse {
    let resp = server.get(path);
    assert_eq!(resp.status, 200, "{resp:#?}");
    resp
}

fn html_listing_is_an_html5_page_with_title(v: Variant) {
    let root = site();
    let server = listing_server(v, &root);
    let resp = get_listing(&server, "/d/");
    let content_type = resp.header("content-type").unwrap().to_ascii_lowercase();
    assert!(content_type.starts_with("text/html"), "{content_type}");
    let page = resp.body_str();
    assert!(page.starts_with("<!DOCTYPE html>"), "{page}");
    assert!(page.contains("<title>Index of /d/</title>"), "{page}");
    assert_eq!(
        resp.header("content-length"),
        Some(resp.body.len().to_string().as_str())
    );
}

fn html_listing_has_dirs_first_then_files_sorted(v: Variant) {
    let root = site();
    let server = listing_server(v, &root);
    let page = get_listing(&server, "/d/").body_str();
    let texts: Vec<String> = entry_anchors(&page)
        .into_iter()
        .map(|(_, text)| html_unescape(&text))
        .collect();
    assert_eq!(
        texts,
        ["../", "abc/", "sub/", "Z.txt", FUNNY, "b.txt"],
        "{page}"
    );
}

fn html_listing_escapes_names_and_encodes_hrefs(v: Variant) {
    let root = site();
    let server = listing_server(v, &root);
    let page = get_listing(&server, "/d/").body_str();
    let (href, text) = entry_anchors(&page)
        .into_iter()
        .find(|(_, text)| html_unescape(text) == FUNNY)
        .unwrap_or_else(|| panic!("no anchor for {FUNNY:?}: {page}"));
    assert_eq!(text, "a &lt;&amp;&gt;.txt", "escaped link text");
    assert!(!page.contains(FUNNY), "raw name in the page: {page}");
    let href = html_unescape(&href);
    assert!(
        !href.contains([' ', '<', '>']),
        "href not %-encoded: {href:?}"
    );
    assert_eq!(percent_decode(&href), FUNNY.as_bytes(), "href {href:?}");
}

fn html_listing_links_directories_with_a_slash(v: Variant) {
    let root = site();
    let server = listing_server(v, &root);
    let page = get_listing(&server, "/d/").body_str();
    let links = entry_anchors(&page);
    assert!(
        links.contains(&("sub/".to_string(), "sub/".to_string())),
        "{page}"
    );
    assert!(
        links.contains(&("../".to_string(), "../".to_string())),
        "{page}"
    );
    assert!(
        links.contains(&("b.txt".to_string(), "b.txt".to_string())),
        "{page}"
    );
}

fn html_listing_shows_sizes_and_dates(v: Variant) {
    let root = site();
    root.file("d/big.bin", vec![b'x'; 1300]);
    let server = listing_server(v, &root);
    let page = get_listing(&server, "/d/").body_str();
    let row = row_text(&page, "b.txt");
    assert!(row.contains(" 3 B "), "size 3 in {row:?}");
    // rfc_example_time() + 1000 s, to the minute, in UTC.
    assert!(row.contains("1994-11-06 09:06"), "date in {row:?}");
    let row = row_text(&page, "Z.txt");
    assert!(row.contains(" 7 B "), "size 7 in {row:?}");
    assert!(row.contains("1994-11-06 08:49"), "{row:?}");
    let row = row_text(&page, "big.bin");
    assert!(row.contains(" 1.3 KiB "), "{row:?}");
    assert!(
        page.contains("title=\"1300 bytes\">1.3 KiB<"),
        "the exact size on hover: {page}"
    );
    assert!(page.contains("Modified (UTC)"), "{page}");
}

fn html_listing_fits_phones_and_needs_nothing_else(v: Variant) {
    let root = site();
    let server = listing_server(v, &root);
    let page = get_listing(&server, "/d/").body_str();
    assert!(
        page.contains("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"),
        "{page}"
    );
    assert!(page.contains("<style>"), "{page}");
    // An empty icon, so that a browser does not ask for /favicon.ico (a 404 in the
    // log on every view); it is the one link, and it asks for nothing.
    let icon = "<link rel=\"icon\" href=\"data:,\">";
    assert!(page.contains(icon), "{page}");
    let page = page.replace(icon, "");
    for external in ["<script", "<link", "src=", "@import", "url("] {
        assert!(!page.contains(external), "{external} in {page}");
    }
    // On a phone the headings wrap as the rows do: the name's on a line of its own,
    // size and date over their columns (headless Chromium at 360 px showed them
    // side by side, the size heading over the dates, before).
    let phone = &page[page
        .find("@media (max-width: 32rem)")
        .expect("a phone layout")..];
    assert!(phone.contains(".name { flex: 1 0 100%; }"), "{phone}");
    assert!(phone.contains(".size { min-width: 4.5rem; }"), "{phone}");
}

fn title_and_heading_show_the_decoded_path(v: Variant) {
    let root = Docroot::new();
    root.file("with space/<b> & ü/x.txt", "x");
    let server = listing_server(v, &root);
    let page = get_listing(&server, "/with%20space/%3Cb%3E%20&%20%C3%BC/").body_str();
    let shown = "Index of /with space/&lt;b&gt; &amp; ü/";
    assert!(page.contains(&format!("<title>{shown}</title>")), "{page}");
    assert!(page.contains(&format!("<h1>{shown}</h1>")), "{page}");
}

fn hidden_entries_are_not_listed(v: Variant) {
    let root = site();
    let server = listing_server(v, &root);
    let page = get_listing(&server, "/d/").body_str();
    assert!(!page.contains(".hidden"), "{page}");
    let json = get_json(&server, "/d/");
    assert!(!json.contains(".hidden"), "{json}");
}

fn root_listing_has_no_parent_link(v: Variant) {
    let root = Docroot::new();
    root.file("top.txt", "top");
    let server = listing_server(v, &root);
    let page = get_listing(&server, "/").body_str();
    assert!(page.contains("<title>Index of /</title>"), "{page}");
    let hrefs: Vec<String> = entry_anchors(&page).into_iter().map(|(h, _)| h).collect();
    assert_eq!(hrefs, ["top.txt"], "{page}");
}

fn listing_has_vary_strong_etag_and_newest_last_modified(v: Variant) {
    let root = site();
    let server = listing_server(v, &root);
    let resp = get_listing(&server, "/d/");
    let vary = resp.header_all("vary").join(",").to_ascii_lowercase();
    assert!(
        vary.split(',').any(|t| t.trim() == "accept"),
        "Vary: {vary:?}"
    );
    let etag = resp.header("etag").expect("ETag");
    assert!(
        etag.starts_with('"') && etag.ends_with('"'),
        "strong ETag {etag}"
    );
    assert_eq!(
        resp.header("last-modified"),
        Some(http_date(newest()).as_str())
    );
}

fn listing_etag_changes_when_the_directory_changes(v: Variant) {
    let root = site();
    let server = listing_server(v, &root);
    let before = get_listing(&server, "/d/");
    root.file("d/new.txt", "new");
    let after = get_listing(&server, "/d/");
    assert!(after.body_str().contains("new.txt"), "{after:#?}");
    assert_ne!(before.header("etag"), after.header("etag"));
}

fn head_gets_the_listing_headers_and_no_body(v: Variant) {
    let root = site();
    let server = listing_server(v, &root);
    let get = get_listing(&server, "/d/");
    let head = server.request("HEAD", "/d/", &[]);
    assert_eq!(head.status, 200, "{head:#?}");
    assert!(head.body.is_empty());
    for field in [
        "content-type",
        "content-length",
        "etag",
        "last-modified",
        "vary",
    ] {
        assert_eq!(head.header(field), get.header(field), "{field}");
    }
}

fn if_none_match_with_the_listing_etag_gets_304(v: Variant) {
    let root = site();
    let server = listing_server(v, &root);
    let etag = get_listing(&server, "/d/")
        .header("etag")
        .unwrap()
        .to_string();
    let resp = server.request("GET", "/d/", &[("if-none-match", &etag)]);
    assert_eq!(resp.status, 304, "{resp:#?}");
    assert!(resp.body.is_empty());
    assert_eq!(resp.header("etag"), Some(etag.as_str()));
}

fn without_listing_flag_a_directory_without_index_is_404(v: Variant) {
    let root = site();
    let server = Server::start(v, &root);
    assert_error_h(&server.get("/d/"), 404);
    assert_error_h(
        &server.request("GET", "/d/", &[("accept", "application/json")]),
        404,
    );
}

fn directory_with_index_still_serves_the_index(v: Variant) {
    let root = site();
    root.file("withindex/index.html", "<p>the index</p>\n");
    root.file("withindex/other.txt", "other");
    let server = listing_server(v, &root);
    let resp = server.get("/withindex/");
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.body_str(), "<p>the index</p>\n");
}

fn directory_without_slash_still_redirects(v: Variant) {
    let root = site();
    let server = listing_server(v, &root);
    let resp = server.get("/d");
    assert_eq!(resp.status, 301, "{resp:#?}");
    assert_eq!(resp.header("location"), Some("/d/"));
}

// --- Awkward names --------------------------------------------------------------------

/// Names that break naive links: URL delimiters, escapes, a leading dash, a colon
/// (a scheme?), markup characters and non-ASCII.
const AWKWARD: [&str; 9] = [
    "with space.txt",
    "hash#tag.txt",
    "what?.txt",
    "100%.txt",
    "-rf",
    "a:b.txt",
    "<i>&\"'.txt",
    "naïve café.txt",
    "日本.txt",
];

fn every_link_reaches_its_file(v: Variant) {
    let root = Docroot::new();
    for (i, name) in AWKWARD.iter().enumerate() {
        root.file(&format!("odd/{name}"), format!("file {i}"));
    }
    root.file("odd/dir #2/inner.txt", "inner");
    let server = listing_server(v, &root);
    let page = get_listing(&server, "/odd/?sort=date&order=desc").body_str();
    let links = entry_anchors(&page);
    for (i, name) in AWKWARD.iter().enumerate() {
        let (href, _) = links
            .iter()
            .find(|(_, text)| html_unescape(text) == *name)
            .unwrap_or_else(|| panic!("no link for {name:?}: {page}"));
        // A relative reference, resolved against the listing's URL (the query drops).
        let href = html_unescape(href);
        assert!(!href.contains(['#', '?', ' ', '<', '"']), "{href:?}");
        let resp = server.get(&format!("/odd/{href}"));
        assert_eq!(resp.status, 200, "{name:?} via {href:?}: {resp:#?}");
        assert_eq!(resp.body_str(), format!("file {i}"), "{name:?}");
    }
    let (dir_href, _) = links
        .iter()
        .find(|(_, text)| text == "dir #2/")
        .unwrap_or_else(|| panic!("no link for the directory: {page}"));
    assert_eq!(dir_href, "dir%20%232/");
    assert_eq!(get_listing(&server, "/odd/dir%20%232/").status, 200);
}

// --- Sorting by query --------------------------------------------------------------

fn entry_texts(page: &str) -> Vec<String> {
    entry_anchors(page)
        .into_iter()
        .map(|(_, text)| html_unescape(&text))
        .filter(|t| t != "../")
        .collect()
}

fn html_listing_sorts_by_the_query(v: Variant) {
    let root = site();
    let server = listing_server(v, &root);
    let order = |query: &str| entry_texts(&get_listing(&server, &format!("/d/{query}")).body_str());
    // Sizes: b.txt 3, FUNNY 6, Z.txt 7; b.txt is the newest, the others (and the two
    // directories) tie by date, and ties go by name.
    // Directories come first whatever the order.
    assert_eq!(
        order("?sort=size&order=asc"),
        ["abc/", "sub/", "b.txt", FUNNY, "Z.txt"]
    );
    assert_eq!(
        order("?sort=size&order=desc"),
        ["abc/", "sub/", "Z.txt", FUNNY, "b.txt"]
    );
    assert_eq!(
        order("?sort=date&order=desc"),
        ["abc/", "sub/", "b.txt", "Z.txt", FUNNY]
    );
    assert_eq!(
        order("?sort=name&order=desc"),
        ["sub/", "abc/", "b.txt", FUNNY, "Z.txt"]
    );
    assert_eq!(order("?order=asc&sort=size"), order("?sort=size"));
}

fn column_headings_are_links_that_toggle_the_order(v: Variant) {
    let root = site();
    let server = listing_server(v, &root);
    let heading_links = |path: &str| -> Vec<String> {
        let page = get_listing(&server, path).body_str();
        let thead = &page[page.find("<thead>").unwrap()..page.find("</thead>").unwrap()];
        anchors(thead)
            .into_iter()
            .map(|(href, _)| html_unescape(&href))
            .collect()
    };
    assert_eq!(
        heading_links("/d/"),
        [
            "?sort=name&order=desc",
            "?sort=size&order=asc",
            "?sort=date&order=asc"
        ]
    );
    assert_eq!(
        heading_links("/d/?sort=size&order=asc"),
        [
            "?sort=name&order=asc",
            "?sort=size&order=desc",
            "?sort=date&order=asc"
        ]
    );
    assert_eq!(
        heading_links("/d/?sort=size&order=desc")[1],
        "?sort=size&order=asc"
    );
}

fn invalid_sort_values_fall_back_to_name_ascending(v: Variant) {
    let root = site();
    let server = listing_server(v, &root);
    let plain = get_listing(&server, "/d/");
    for query in [
        "?sort=bogus&order=sideways",
        "?sort=",
        "?order=",
        "?sort=SIZE",
        "?sort=name&order=asc",
        "?x=1",
        "?",
        "?sort=size%00&order=%ZZ",
    ] {
        let resp = get_listing(&server, &format!("/d/{query}"));
        assert_eq!(resp.body, plain.body, "{query}");
        assert_eq!(resp.header("etag"), plain.header("etag"), "{query}");
    }
}

fn json_listing_honours_the_sort(v: Variant) {
    let root = site();
    let server = listing_server(v, &root);
    let names = |path: &str| -> Vec<String> {
        let text = get_json(&server, path);
        json::parse(&text)
            .get("entries")
            .as_array()
            .iter()
            .map(|e| e.get("name").as_str().to_string())
            .collect()
    };
    assert_eq!(
        names("/d/?sort=size&order=desc"),
        ["abc", "sub", "Z.txt", FUNNY, "b.txt"]
    );
    assert_eq!(
        names("/d/?sort=date&order=desc"),
        ["abc", "sub", "b.txt", "Z.txt", FUNNY]
    );
    assert_eq!(names("/d/?sort=nonsense"), names("/d/"));
}

fn each_order_has_its_own_etag(v: Variant) {
    let root = site();
    let server = listing_server(v, &root);
    let plain = get_listing(&server, "/d/");
    let by_size = get_listing(&server, "/d/?sort=size&order=desc");
    let plain_etag = plain.header("etag").unwrap();
    let size_etag = by_size.header("etag").unwrap();
    assert_ne!(plain_etag, size_etag);
    assert_eq!(
        by_size.header("last-modified"),
        plain.header("last-modified")
    );
    assert!(by_size.header("vary").unwrap().contains("Accept"));
    let again = server.request(
        "GET",
        "/d/?sort=size&order=desc",
        &[("if-none-match", size_etag)],
    );
    assert_eq!(again.status, 304, "{again:#?}");
    assert_eq!(again.header("etag"), Some(size_etag));
    // The sorted ETag does not validate the unsorted page, nor the reverse.
    let other = server.request("GET", "/d/", &[("if-none-match", size_etag)]);
    assert_eq!(other.status, 200, "{other:#?}");
    assert_eq!(other.body, plain.body);
    let other = server.request(
        "GET",
        "/d/?sort=size&order=desc",
        &[("if-none-match", plain_etag)],
    );
    assert_eq!(other.status, 200, "{other:#?}");
    let head = server.request("HEAD", "/d/?sort=size&order=desc", &[]);
    assert!(head.body.is_empty());
    assert_eq!(head.header("etag"), Some(size_etag));
    assert_eq!(
        head.header("content-length"),
        by_size.header("content-length")
    );
}

// --- JSON ---------------------------------------------------------------------------

fn get_json(server: &Server, path: &str) -> String {
    let resp = server.request("GET", path, &[("accept", "application/json")]);
    assert_eq!(resp.status, 200, "{resp:#?}");
    let content_type = resp.header("content-type").unwrap().to_ascii_lowercase();
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
    resp.body_str()
}

fn json_listing_has_path_and_entries_in_order(v: Variant) {
    let root = site();
    let server = listing_server(v, &root);
    let text = get_json(&server, "/d/");
    let doc = json::parse(&text);
    assert_eq!(doc.get("path").as_str(), "/d/", "{text}");
    let entries = doc.get("entries").as_array();
    let names: Vec<&str> = entries.iter().map(|e| e.get("name").as_str()).collect();
    assert_eq!(names, ["abc", "sub", "Z.txt", FUNNY, "b.txt"], "{text}");
    let types: Vec<&str> = entries.iter().map(|e| e.get("type").as_str()).collect();
    assert_eq!(
        types,
        ["directory", "directory", "file", "file", "file"],
        "{text}"
    );
}

/// A symlink is listed as serving would find it: one that stays inside the
/// root shows its target's size; one that leads out (which would be 404)
/// is left out, so no size or date of a file outside the root shows.
fn symlinks_out_of_the_root_are_not_listed(v: Variant) {
    let outside = Docroot::new();
    let secret = outside.file("secret.txt", "0123456789 outside the root");
    let root = Docroot::new();
    root.file("d/real.txt", "inside");
    root.file("other/far.txt", "farther inside");
    root.symlink("d/near", "real.txt");
    root.symlink("d/far", "../other/far.txt");
    root.symlink("d/out", &secret);
    root.symlink("d/up", "../../../../../../../../etc/hostname");
    let server = listing_server(v, &root);
    let text = get_json(&server, "/d/");
    let doc = json::parse(&text);
    let entries = doc.get("entries").as_array();
    let listed: Vec<(&str, u64)> = entries
        .iter()
        .map(|e| (e.get("name").as_str(), e.get("size").as_u64()))
        .collect();
    assert_eq!(
        listed,
        [("far", 14), ("near", 6), ("real.txt", 6)],
        "{text}"
    );
    assert_eq!(server.get("/d/out").status, 404);
}

fn json_listing_has_sizes_and_unix_mtimes(v: Variant) {
    let root = site();
    let server = listing_server(v, &root);
    let text = get_json(&server, "/d/");
    let doc = json::parse(&text);
    let entries = doc.get("entries").as_array();
    let entry = |name: &str| {
        entries
            .iter()
            .find(|e| e.get("name").as_str() == name)
            .unwrap_or_else(|| panic!("no entry {name:?} in {text}"))
    };
    assert_eq!(entry("b.txt").get("size").as_u64(), 3);
    assert_eq!(entry("b.txt").get("modified").as_u64(), unix_secs(newest()));
    assert_eq!(entry(FUNNY).get("size").as_u64(), 6);
    assert_eq!(
        entry("Z.txt").get("modified").as_u64(),
        unix_secs(rfc_example_time())
    );
    // A directory's st_size says nothing about its contents.
    assert_eq!(entry("sub").get("size"), &json::Value::Null);
}

fn json_is_chosen_only_when_preferred_to_html(v: Variant) {
    let root = site();
    let server = listing_server(v, &root);
    let json = server.request(
        "GET",
        "/d/",
        &[("accept", "text/html;q=0.5, application/json")],
    );
    assert!(json
        .header("content-type")
        .unwrap()
        .starts_with("application/json"));
    let html = server.request(
        "GET",
        "/d/",
        &[("accept", "text/html, application/json;q=0.9")],
    );
    assert!(html
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    let html = server.request("GET", "/d/", &[("accept", "*/*")]);
    assert!(html
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
}

fn json_listing_escapes_quotes(v: Variant) {
    let root = Docroot::new();
    root.file("q/say \"hi\".txt", "hi");
    let server = listing_server(v, &root);
    let text = get_json(&server, "/q/");
    let doc = json::parse(&text);
    let entries = doc.get("entries").as_array();
    assert_eq!(entries[0].get("name").as_str(), "say \"hi\".txt", "{text}");
}

/// Just enough JSON to check a listing (no dependency on a JSON crate).
mod json {
    #[derive(Debug, Clone, PartialEq)]
    pub enum Value {
        Null,
        Bool(bool),
        Number(f64),
        String(String),
        Array(Vec<Value>),
        Object(Vec<(String, Value)>),
    }

    impl Value {
        pub fn get(&self, key: &str) -> &Value {
            match self {
                Value::Object(fields) => fields
                    .iter()
                    .find(|(k, _)| k == key)
                    .map(|(_, v)| v)
                    .unwrap_or_else(|| panic!("no key {key:?} in {self:?}")),
                _ => panic!("not an object: {self:?}"),
            }
        }

        pub fn as_str(&self) -> &str {
            match self {
                Value::String(s) => s,
                _ => panic!("not a string: {self:?}"),
            }
        }

        pub fn as_array(&self) -> &[Value] {
            match self {
                Value::Array(items) => items,
                _ => panic!("not an array: {self:?}"),
            }
        }

        pub fn as_u64(&self) -> u64 {
            match self {
                Value::Number(n) if *n >= 0.0 && n.fract() == 0.0 => *n as u64,
                _ => panic!("not a non-negative integer: {self:?}"),
            }
        }
    }

    /// Parses a whole document; panics (naming the offset) on anything invalid.
    pub fn parse(text: &str) -> Value {
        let mut p = Parser {
            s: text.as_bytes(),
            i: 0,
        };
        let v = p.value();
        p.ws();
        assert_eq!(p.i, p.s.len(), "trailing bytes after JSON: {text}");
        v
    }

    struct Parser<'a> {
        s: &'a [u8],
        i: usize,
    }

    impl Parser<'_> {
        fn ws(&mut self) {
            while self.i < self.s.len() && b" \t\r\n".contains(&self.s[self.i]) {
                self.i += 1;
            }
        }

        fn peek(&mut self) -> u8 {
            self.ws();
            *self
                .s
                .get(self.i)
                .unwrap_or_else(|| panic!("JSON ends early"))
        }

        fn expect(&mut self, b: u8) {
            assert_eq!(
                self.peek(),
                b,
                "JSON: expected {:?} at {}",
                b as char,
                self.i
            );
            self.i += 1;
        }

        fn literal(&mut self, word: &str, v: Value) -> Value {
            assert!(
                self.s[self.i..].starts_with(word.as_bytes()),
                "JSON: bad literal at {}",
                self.i
            );
            self.i += word.len();
            v
        }

        fn value(&mut self) -> Value {
            match self.peek() {
                b'{' => self.object(),
                b'[' => self.array(),
                b'"' => Value::String(self.string()),
                b't' => self.literal("true", Value::Bool(true)),
                b'f' => self.literal("false", Value::Bool(false)),
                b'n' => self.literal("null", Value::Null),
                _ => self.number(),
            }
        }

        fn object(&mut self) -> Value {
            self.expect(b'{');
            let mut fields = Vec::new();
            if self.peek() == b'}' {
                self.i += 1;
                return Value::Object(fields);
            }
            loop {
                let key = self.string();
                self.expect(b':');
                fields.push((key, self.value()));
                match self.peek() {
                    b',' => self.i += 1,
                    b'}' => {
                        self.i += 1;
                        return Value::Object(fields);
                    }
                    other => panic!("JSON: unexpected {:?} at {}", other as char, self.i),
                }
            }
        }

        fn array(&mut self) -> Value {
            self.expect(b'[');
            let mut items = Vec::new();
            if self.peek() == b']' {
                self.i += 1;
                return Value::Array(items);
            }
            loop {
                items.push(self.value());
                match self.peek() {
                    b',' => self.i += 1,
                    b']' => {
                        self.i += 1;
                        return Value::Array(items);
                    }
                    other => panic!("JSON: unexpected {:?} at {}", other as char, self.i),
                }
            }
        }

        fn string(&mut self) -> String {
            self.expect(b'"');
            let mut out: Vec<u8> = Vec::new();
            loop {
                let b = self.s[self.i];
                self.i += 1;
                match b {
                    b'"' => return String::from_utf8(out).expect("UTF-8 string"),
                    b'\\' => {
                        let e = self.s[self.i];
                        self.i += 1;
                        let c = match e {
                            b'"' => '"',
                            b'\\' => '\\',
                            b'/' => '/',
                            b'b' => '\u{8}',
                            b'f' => '\u{c}',
                            b'n' => '\n',
                            b'r' => '\r',
                            b't' => '\t',
                            b'u' => {
                                let hex = std::str::from_utf8(&self.s[self.i..self.i + 4]).unwrap();
                                self.i += 4;
                                char::from_u32(u32::from_str_radix(hex, 16).unwrap())
                                    .expect("\\u escape of a scalar value")
                            }
                            _ => panic!("JSON: bad escape at {}", self.i),
                        };
                        let mut buf = [0; 4];
                        out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                    }
                    b if b < 0x20 => panic!("JSON: raw control byte in string at {}", self.i),
                    b => out.push(b),
                }
            }
        }

        fn number(&mut self) -> Value {
            let start = self.i;
            while self.i < self.s.len() && b"+-0123456789.eE".contains(&self.s[self.i]) {
                self.i += 1;
            }
            let text = std::str::from_utf8(&self.s[start..self.i]).unwrap();
            Value::Number(
                text.parse()
                    .unwrap_or_else(|_| panic!("JSON: bad number {text:?} at {start}")),
            )
        }
    }
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    symlinks_out_of_the_root_are_not_listed,
    html_listing_is_an_html5_page_with_title,
    html_listing_has_dirs_first_then_files_sorted,
    html_listing_escapes_names_and_encodes_hrefs,
    html_listing_links_directories_with_a_slash,
    html_listing_shows_sizes_and_dates,
    html_listing_fits_phones_and_needs_nothing_else,
    title_and_heading_show_the_decoded_path,
    every_link_reaches_its_file,
    html_listing_sorts_by_the_query,
    column_headings_are_links_that_toggle_the_order,
    invalid_sort_values_fall_back_to_name_ascending,
    json_listing_honours_the_sort,
    each_order_has_its_own_etag,
    hidden_entries_are_not_listed,
    root_listing_has_no_parent_link,
    listing_has_vary_strong_etag_and_newest_last_modified,
    listing_etag_changes_when_the_directory_changes,
    head_gets_the_listing_headers_and_no_body,
    if_none_match_with_the_listing_etag_gets_304,
    without_listing_flag_a_directory_without_index_is_404,
    directory_with_index_still_serves_the_index,
    directory_without_slash_still_redirects,
    json_listing_has_path_and_entries_in_order,
    json_listing_has_sizes_and_unix_mtimes,
    json_is_chosen_only_when_preferred_to_html,
    json_listing_escapes_quotes,
);
