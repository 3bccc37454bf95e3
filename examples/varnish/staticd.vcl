vcl 4.1;

# Varnish (7.x) in front of staticd.
#
# staticd already tells a cache everything it needs: a strong ETag and
# Last-Modified on every file (so Varnish revalidates with If-None-Match /
# If-Modified-Since and gets a 304 when nothing changed), Vary on every
# negotiated response (Accept-Encoding for compressed variants, Accept for
# AVIF/WebP images and error pages), and Cache-Control where the site's
# _headers file sets it. This VCL adds what staticd cannot know: how long to
# trust a file nobody gave a lifetime, what never to cache, and how to keep
# Varnish's own gzip handling and range support from getting in the way.
#
# Tested by tests/varnish.rs, which runs this file with the backend port
# changed (and, in some tests, one of its limits lowered).

import std;

# staticd closes a keep-alive connection after --keepalive-timeout (15 s)
# idle; Varnish reuses idle backend connections for backend_idle_timeout
# (60 s). Start varnishd with `-p backend_idle_timeout=10` (below staticd's),
# or staticd with a longer --keepalive-timeout, so Varnish never sends a
# request down a connection staticd is closing: it retries such a GET, but a
# POST to a CGI script would fail with 503.
backend staticd {
    .host = "127.0.0.1";
    .port = "8080";
    # `OPTIONS *` is answered (204) by staticd itself, whatever the site holds:
    # no file has to exist for the probe, and a missing index is not an outage.
    .probe = {
        .request =
            "OPTIONS * HTTP/1.1"
            "Host: localhost"
            "User-Agent: varnish-probe"
            "Connection: close";
        .expected_response = 204;
        .interval = 5s;
        .timeout = 2s;
        .window = 5;
        .threshold = 3;
        # Healthy from the start: a fresh Varnish serves at once.
        .initial = 3;
    }
}

sub vcl_recv {
    # Our own request headers are set below, never taken from a client.
    unset req.http.X-Staticd-Encoding;
    unset req.http.X-Staticd-Range;

    # From the built-in VCL: lower-case Host, 400 without one, pipe odd
    # methods, pass everything but GET and HEAD (POST goes to CGI).
    call vcl_req_host;
    call vcl_req_method;

    # CGI output is made per request: never cached. staticd runs any
    # executable *.cgi (with PATH_INFO after it); /cgi-bin/ is the usual home.
    if (req.url ~ "^/cgi-bin/" || req.url ~ "^[^?]*\.cgi(/|\?|$)") {
        return (pass);
    }

    # Credentials (--auth areas) are checked by staticd on every request: a
    # response for one user must not be served to another, or to nobody.
    if (req.http.Authorization) {
        return (pass);
    }

    # staticd never reads cookies (only CGI does, and that is passed above).
    # The built-in VCL passes any request with a Cookie, which on a site that
    # sets one for analytics would mean nothing is ever cached.
    unset req.http.Cookie;

    # Varnish serves ranges from the cached whole object itself, but only a
    # single one: several ranges (or a Range it cannot parse) would get a 416
    # from Varnish where staticd sends 206 multipart/byteranges (or the whole
    # file, for a Range it ignores). Several ranges go to staticd, hidden from
    # Varnish's range check (restored in vcl_backend_fetch); a Range that is
    # not one byte range is ignored, as RFC 9110 says, and the client gets 200.
    if (req.http.Range) {
        if (req.http.Range ~ "^bytes=[0-9]*-[0-9]*(\s*,\s*[0-9]*-[0-9]*)+$") {
            set req.http.X-Staticd-Range = req.http.Range;
            unset req.http.Range;
            return (pass);
        }
        if (req.http.Range !~ "^bytes=([0-9]+-[0-9]*|-[0-9]+)$") {
            unset req.http.Range;
        }
    }

    call staticd_accept_encoding;

    # While staticd is up, serve an object at most 10 s past its TTL (and
    # revalidate it in the background); while it is down, whatever grace
    # vcl_backend_response gave it.
    if (std.healthy(req.backend_hint)) {
        set req.grace = 10s;
    }
    return (hash);
}

# One coding per request, so that each precompressed or compressed variant is
# one cache object: br, else zstd, else gzip, else identity. staticd sends
# `file.css.br` (or compresses on the fly) for `br`, `file.css.gz` for `gzip`,
# and the file itself otherwise, always with `Vary: Accept-Encoding`.
#
# The choice is kept in X-Staticd-Encoding, hashed (vcl_hash) and put back on
# the backend request (vcl_backend_fetch), because with Varnish's default
# http_gzip_support=on Varnish itself rewrites Accept-Encoding after vcl_recv
# (to `gzip` or nothing), asks the backend for gzip, and ignores
# Accept-Encoding when matching Vary: left alone, it would cache the br
# variant and hand it to a client that only takes gzip. With the hash, each
# coding is its own object whatever http_gzip_support says.
#
# A coding refused with q=0 is dropped first. Among the rest the order is
# fixed (the client takes any coding it names); `*` is not read, so such a
# client gets the file as it is, which every client accepts.
sub staticd_accept_encoding {
    set req.http.X-Staticd-Encoding = regsuball(req.http.Accept-Encoding,
        "(?i)[a-z0-9*!#$%&'+.^_`|~-]+\s*;\s*q\s*=\s*0(\.0*)?\s*(,|$)", "");
    if (req.http.X-Staticd-Encoding ~ "(?i)(^|,)\s*br\s*(;|,|$)") {
        set req.http.X-Staticd-Encoding = "br";
    } elsif (req.http.X-Staticd-Encoding ~ "(?i)(^|,)\s*zstd\s*(;|,|$)") {
        set req.http.X-Staticd-Encoding = "zstd";
    } elsif (req.http.X-Staticd-Encoding ~ "(?i)(^|,)\s*(x-)?gzip\s*(;|,|$)") {
        set req.http.X-Staticd-Encoding = "gzip";
    } else {
        set req.http.X-Staticd-Encoding = "identity";
    }
    if (req.http.X-Staticd-Encoding == "identity") {
        unset req.http.Accept-Encoding;
    } else {
        set req.http.Accept-Encoding = req.http.X-Staticd-Encoding;
    }
}

sub vcl_hash {
    hash_data(req.url);
    if (req.http.Host) {
        hash_data(req.http.Host);
    } else {
        hash_data(server.ip);
    }
    hash_data(req.http.X-Staticd-Encoding);
    return (lookup);
}

sub vcl_backend_fetch {
    # Undo Varnish's `Accept-Encoding: gzip` (see staticd_accept_encoding).
    # A passed request has no X-Staticd-Encoding and keeps the client's.
    if (bereq.http.X-Staticd-Encoding == "identity") {
        unset bereq.http.Accept-Encoding;
    } elsif (bereq.http.X-Staticd-Encoding) {
        set bereq.http.Accept-Encoding = bereq.http.X-Staticd-Encoding;
    }
    unset bereq.http.X-Staticd-Encoding;
    if (bereq.http.X-Staticd-Range) {
        set bereq.http.Range = bereq.http.X-Staticd-Range;
        unset bereq.http.X-Staticd-Range;
    }
}

sub vcl_backend_response {
    if (bereq.uncacheable) {
        return (deliver);
    }

    # A lifetime from the site (Cache-Control in _headers) wins. Without one a
    # file is trusted for 2 minutes: staticd serves an edited file at once, and
    # asking again costs a 304 with no body (kept objects, below, make it
    # conditional), so a short TTL is cheap.
    if (!beresp.http.Cache-Control && !beresp.http.Expires) {
        if (beresp.status == 404 || beresp.status == 410) {
            # Short, so a file uploaded after someone asked for it appears
            # soon, yet a flood of requests for a missing URL stays here.
            set beresp.ttl = 10s;
        } elsif (beresp.status == 308) {
            # Permanent like 301, which Varnish already caches by default;
            # 302, 303 and 307 stay uncached unless the site gives a lifetime.
            set beresp.ttl = 120s;
        }
    }

    # An error is kept a minute at most, whatever its Cache-Control says:
    # staticd puts a _headers block's fields on every response for its
    # pattern, so `/assets/*  Cache-Control: max-age=31536000, immutable`,
    # written for files that never change, also lands on the 404 of an asset
    # not deployed yet. (Clients still see the field; see the README.)
    if (beresp.status >= 400 && beresp.ttl > 1m) {
        set beresp.ttl = 1m;
    }

    # Grace: how long past its TTL an object may still be served while Varnish
    # refreshes it in the background; vcl_recv shortens it to 10 s while
    # staticd is healthy, so this is how long the site survives staticd being
    # down. Keep: how long an expired object stays to make the refresh a
    # conditional request (If-None-Match / If-Modified-Since, 304).
    if (beresp.ttl > 0s) {
        if (beresp.http.Cache-Control !~ "(?i)stale-while-revalidate") {
            set beresp.grace = 6h;
        }
        set beresp.keep = 1d;
    }

    # A large file (a video, an ISO) would push everything else out of the
    # cache, and a miss fetches the whole file for a client that may want one
    # range of it. Pass such files for an hour: their range requests then go
    # to staticd, which answers them from disk with sendfile.
    # (64 MiB; tests/varnish.rs lowers it.)
    if (std.integer(beresp.http.Content-Length, 0) > 67108864) {
        return (pass(1h));
    }
    # The rest of the built-in logic: no caching for Set-Cookie,
    # Cache-Control: private / no-cache / no-store, or Vary: *.
}

sub vcl_deliver {
    # For people and tests: whether this response came from the cache.
    if (obj.hits > 0) {
        set resp.http.X-Cache = "hit";
    } else {
        set resp.http.X-Cache = "miss";
    }
}
