//! Precompressed siblings chosen by Accept-Encoding, and AVIF/WebP siblings of images
//! chosen by Accept (always on). Every test runs in both modes.
//!
//! staticd never decodes a variant, so the siblings hold distinct, recognisable bytes
//! rather than real compressed data.

#[macro_use]
mod common;

use std::time::Duration;

use common::*;

const ORIGINAL: &str = "body { color: red; }\n/* the original stylesheet */\n";
const BR: &[u8] = b"BR\x00variant\xffbytes";
const ZSTD: &[u8] = b"ZSTD\x00variant-bytes\xfe!";
const GZIP: &[u8] = b"\x1f\x8bGZIP variant bytes, a little longer";

const JPEG: &[u8] = b"\xff\xd8\xff jpeg original";
const WEBP: &[u8] = b"RIFF webp sibling";
const AVIF: &[u8] = b"ftypavif avif sibling!";

/// `x.css` with fresh `.br`, `.zst` and `.gz` siblings (all with the same mtime).
fn css_site() -> Docroot {
    let root = Docroot::new();
    root.file("x.css", ORIGINAL);
    root.file("x.css.br", BR);
    root.file("x.css.zst", ZSTD);
    root.file("x.css.gz", GZIP);
    root
}

/// `photo.jpg` with fresh `.webp` and `.avif` siblings.
fn image_site() -> Docroot {
    let root = Docroot::new();
    root.file("photo.jpg", JPEG);
    root.file("photo.webp", WEBP);
    root.file("photo.avif", AVIF);
    root
}

fn get_encoded(server: &Server, accept_encoding: &str) -> HResponse {
    server.request("GET", "/x.css", &[("accept-encoding", accept_encoding)])
}

/// Every token of every `Vary` field, lower-cased.
fn vary_tokens(resp: &HResponse) -> Vec<String> {
    resp.header_all("vary")
        .iter()
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .collect()
}

fn assert_varies_on(resp: &HResponse, field: &str) {
    let tokens = vary_tokens(resp);
    assert!(
        tokens.iter().any(|t| t == field) || tokens.iter().any(|t| t == "*"),
        "Vary should name {field}: {resp:#?}"
    );
}

fn assert_variant(resp: &HResponse, coding: &str, bytes: &[u8]) {
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.header("content-encoding"), Some(coding), "{resp:#?}");
    assert!(
        resp.body == bytes,
        "expected the {coding} sibling: {resp:#?}"
    );
    assert_eq!(
        resp.header("content-length"),
        Some(bytes.len().to_string().as_str())
    );
    assert_eq!(
        resp.header("content-type").map(str::to_ascii_lowercase),
        Some("text/css; charset=utf-8".to_string()),
        "the original's Content-Type"
    );
    assert_varies_on(resp, "accept-encoding");
}

fn assert_identity(resp: &HResponse) {
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.header("content-encoding"), None, "{resp:#?}");
    assert_eq!(resp.body_str(), ORIGINAL);
    assert_varies_on(resp, "accept-encoding");
}

fn etag(resp: &HResponse) -> String {
    let etag = resp.header("etag").expect("ETag").to_string();
    assert!(
        etag.starts_with('"') && etag.ends_with('"'),
        "strong ETag: {etag}"
    );
    etag
}

// --- content codings ---------------------------------------------------------------

fn br_is_preferred_when_all_codings_are_accepted(v: Variant) {
    let root = css_site();
    let server = Server::start(v, &root);
    assert_variant(&get_encoded(&server, "gzip, deflate, br, zstd"), "br", BR);
}

fn zstd_is_preferred_over_gzip_on_a_tie(v: Variant) {
    let root = css_site();
    let server = Server::start(v, &root);
    assert_variant(&get_encoded(&server, "gzip, zstd"), "zstd", ZSTD);
}

fn only_gzip_accepted_gets_gzip(v: Variant) {
    let root = css_site();
    let server = Server::start(v, &root);
    assert_variant(&get_encoded(&server, "gzip"), "gzip", GZIP);
}

fn q_values_are_honoured(v: Variant) {
    let root = css_site();
    let server = Server::start(v, &root);
    assert_variant(
        &get_encoded(&server, "br;q=0.5, gzip;q=0.9, zstd;q=0.1"),
        "gzip",
        GZIP,
    );
    assert_variant(
        &get_encoded(&server, "gzip;q=0.2, zstd;q=0.3"),
        "zstd",
        ZSTD,
    );
}

fn q_zero_refuses_a_coding(v: Variant) {
    let root = css_site();
    let server = Server::start(v, &root);
    assert_variant(
        &get_encoded(&server, "br;q=0, zstd;q=0.000, gzip"),
        "gzip",
        GZIP,
    );
    assert_identity(&get_encoded(&server, "gzip;q=0"));
}

fn star_covers_unnamed_codings(v: Variant) {
    let root = css_site();
    let server = Server::start(v, &root);
    assert_variant(&get_encoded(&server, "*"), "br", BR);
    assert_variant(&get_encoded(&server, "br;q=0, *"), "zstd", ZSTD);
    assert_variant(&get_encoded(&server, "*;q=0.1, gzip;q=0.5"), "gzip", GZIP);
}

fn identity_only_gets_the_original_with_vary(v: Variant) {
    let root = css_site();
    let server = Server::start(v, &root);
    assert_identity(&get_encoded(&server, "identity"));
}

fn no_accept_encoding_gets_the_original_with_vary(v: Variant) {
    let root = css_site();
    let server = Server::start(v, &root);
    assert_identity(&server.get("/x.css"));
}

fn stale_sibling_is_never_served(v: Variant) {
    let root = css_site();
    set_mtime(
        &root.join("x.css.br"),
        rfc_example_time() - Duration::from_secs(60),
    );
    let server = Server::start(v, &root);
    // The only acceptable sibling is stale: the original, still with Vary.
    assert_identity(&get_encoded(&server, "br"));
    // A fresh sibling further down the list is chosen instead.
    assert_variant(&get_encoded(&server, "br, gzip"), "gzip", GZIP);
}

fn newer_sibling_is_served(v: Variant) {
    let root = css_site();
    set_mtime(
        &root.join("x.css.br"),
        rfc_example_time() + Duration::from_secs(60),
    );
    let server = Server::start(v, &root);
    assert_variant(&get_encoded(&server, "br"), "br", BR);
}

fn sibling_that_is_not_a_regular_file_is_ignored(v: Variant) {
    let root = Docroot::new();
    root.file("y.css", ORIGINAL);
    root.dir("y.css.br");
    root.file("y.css.gz", GZIP);
    let server = Server::start(v, &root);
    let resp = server.request("GET", "/y.css", &[("accept-encoding", "br, gzip")]);
    assert_eq!(resp.header("content-encoding"), Some("gzip"), "{resp:#?}");
    assert!(resp.body == GZIP);
}

fn variant_has_its_own_etag(v: Variant) {
    let root = css_site();
    let server = Server::start(v, &root);
    let identity = etag(&get_encoded(&server, "identity"));
    let br = etag(&get_encoded(&server, "br"));
    let gzip = etag(&get_encoded(&server, "gzip"));
    assert_ne!(br, identity);
    assert_ne!(gzip, identity);
    assert_ne!(br, gzip);
}

fn range_on_a_variant_returns_the_variants_bytes(v: Variant) {
    let root = css_site();
    let server = Server::start(v, &root);
    let resp = server.request(
        "GET",
        "/x.css",
        &[("accept-encoding", "br"), ("range", "bytes=2-7")],
    );
    assert_eq!(resp.status, 206, "{resp:#?}");
    assert_eq!(resp.header("content-encoding"), Some("br"));
    assert!(resp.body == BR[2..=7], "{resp:#?}");
    assert_eq!(
        resp.header("content-range"),
        Some(format!("bytes 2-7/{}", BR.len()).as_str())
    );
    assert_varies_on(&resp, "accept-encoding");
}

fn if_none_match_with_the_variants_etag_gets_304_with_vary(v: Variant) {
    let root = css_site();
    let server = Server::start(v, &root);
    let tag = etag(&get_encoded(&server, "br"));
    let resp = server.request(
        "GET",
        "/x.css",
        &[("accept-encoding", "br"), ("if-none-match", &tag)],
    );
    assert_eq!(resp.status, 304, "{resp:#?}");
    assert!(resp.body.is_empty());
    assert_eq!(resp.header("etag"), Some(tag.as_str()));
    assert_varies_on(&resp, "accept-encoding");
}

fn variants_etag_does_not_validate_the_original(v: Variant) {
    let root = css_site();
    let server = Server::start(v, &root);
    let tag = etag(&get_encoded(&server, "br"));
    let resp = server.request(
        "GET",
        "/x.css",
        &[("accept-encoding", "identity"), ("if-none-match", &tag)],
    );
    assert_identity(&resp);
}

fn head_on_a_variant_has_its_headers_and_no_body(v: Variant) {
    let root = css_site();
    let server = Server::start(v, &root);
    let resp = server.request("HEAD", "/x.css", &[("accept-encoding", "gzip")]);
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.header("content-encoding"), Some("gzip"));
    assert_eq!(
        resp.header("content-length"),
        Some(GZIP.len().to_string().as_str())
    );
    assert!(resp.body.is_empty());
}

fn precompressed_sibling_is_still_served_by_its_own_name(v: Variant) {
    let root = css_site();
    let server = Server::start(v, &root);
    let resp = server.get("/x.css.gz");
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert!(resp.body == GZIP);
}

// --- image formats ------------------------------------------------------------------

fn get_image(server: &Server, accept: &str) -> HResponse {
    server.request("GET", "/photo.jpg", &[("accept", accept)])
}

fn assert_image(resp: &HResponse, content_type: &str, bytes: &[u8]) {
    assert_eq!(resp.status, 200, "{resp:#?}");
    assert_eq!(resp.header("content-type"), Some(content_type), "{resp:#?}");
    assert!(
        resp.body == bytes,
        "expected the {content_type} file: {resp:#?}"
    );
    assert_eq!(
        resp.header("content-length"),
        Some(bytes.len().to_string().as_str())
    );
    assert_eq!(resp.header("content-encoding"), None);
    assert_varies_on(resp, "accept");
}

fn avif_is_preferred_when_named(v: Variant) {
    let root = image_site();
    let server = Server::start(v, &root);
    assert_image(
        &get_image(&server, "image/avif,image/webp,*/*"),
        "image/avif",
        AVIF,
    );
}

fn webp_is_served_when_only_webp_is_named(v: Variant) {
    let root = image_site();
    let server = Server::start(v, &root);
    assert_image(&get_image(&server, "image/webp"), "image/webp", WEBP);
    assert_image(
        &get_image(&server, "image/avif;q=0, image/webp, */*"),
        "image/webp",
        WEBP,
    );
}

fn wildcards_get_the_original_image(v: Variant) {
    let root = image_site();
    let server = Server::start(v, &root);
    assert_image(&get_image(&server, "*/*"), "image/jpeg", JPEG);
    assert_image(&get_image(&server, "image/*"), "image/jpeg", JPEG);
}

fn no_accept_gets_the_original_image_with_vary(v: Variant) {
    let root = image_site();
    let server = Server::start(v, &root);
    assert_image(&server.get("/photo.jpg"), "image/jpeg", JPEG);
}

fn stale_image_sibling_is_not_served(v: Variant) {
    let root = image_site();
    set_mtime(
        &root.join("photo.avif"),
        rfc_example_time() - Duration::from_secs(60),
    );
    let server = Server::start(v, &root);
    assert_image(
        &get_image(&server, "image/avif,image/webp,*/*"),
        "image/webp",
        WEBP,
    );
    assert_image(&get_image(&server, "image/avif"), "image/jpeg", JPEG);
}

fn png_gets_a_webp_sibling(v: Variant) {
    let root = Docroot::new();
    root.file("logo.png", b"\x89PNG original");
    root.file("logo.webp", WEBP);
    let server = Server::start(v, &root);
    let resp = server.request("GET", "/logo.png", &[("accept", "image/webp,*/*")]);
    assert_image(&resp, "image/webp", WEBP);
}

matrix!([h1, tls, h2c, h2_tls, h3, uring] both_modes:
    br_is_preferred_when_all_codings_are_accepted,
    zstd_is_preferred_over_gzip_on_a_tie,
    only_gzip_accepted_gets_gzip,
    q_values_are_honoured,
    q_zero_refuses_a_coding,
    star_covers_unnamed_codings,
    identity_only_gets_the_original_with_vary,
    no_accept_encoding_gets_the_original_with_vary,
    stale_sibling_is_never_served,
    newer_sibling_is_served,
    sibling_that_is_not_a_regular_file_is_ignored,
    variant_has_its_own_etag,
    range_on_a_variant_returns_the_variants_bytes,
    if_none_match_with_the_variants_etag_gets_304_with_vary,
    variants_etag_does_not_validate_the_original,
    head_on_a_variant_has_its_headers_and_no_body,
    precompressed_sibling_is_still_served_by_its_own_name,
    avif_is_preferred_when_named,
    webp_is_served_when_only_webp_is_named,
    wildcards_get_the_original_image,
    no_accept_gets_the_original_image_with_vary,
    stale_image_sibling_is_not_served,
    png_gets_a_webp_sibling,
);
