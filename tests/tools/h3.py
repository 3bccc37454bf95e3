#!/usr/bin/env python3
"""An HTTP/3 client for staticd's tests, on aioquic (pip install aioquic).

Drives aioquic's sans-I/O QUIC and HTTP/3 state machines over one UDP
socket, so that a test can also do what a well-behaved client never does:
stop answering mid-handshake, flood handshakes, replay a 0-RTT flight.
Each command prints one JSON object on stdout.

  get     URL... [--ca F] [--ticket F] [--zero-rtt] [--method M] [--data S]
          [--out DIR] [--started F] [--timeout S]: the requests on one
          connection; statuses, headers, body lengths (bodies written to
          DIR/<n> when given; F created when the first response headers
          arrive); S seconds for the responses (10 by default); `seconds`:
          how long they took, from the first packet
  flood   HOST PORT N: N handshakes' first flights from one socket, never
          continued; how many answers were Retry packets
  amplify HOST PORT: one client Initial, never continued; the bytes the
          server sent back before giving up
  early   URL --ticket F [--method M] [--data S]: with a saved session
          ticket, a request in 0-RTT whose client never finishes its
          handshake; whether a response came (0.5-RTT) and the first flight,
          replayed from a second socket
  streams URL N: N request streams at once, past the server's limit
  stall   URL [--seconds S] [--started F]: the first bytes of URL, then
          silence (F created when they have come)
"""

import argparse
import json
import os
import pickle
import socket
import sys
import time
from urllib.parse import urlparse

from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import ConnectionTerminated, HandshakeCompleted

TIMEOUT = 10.0


def configuration(args, ticket_out=None):
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    ca = getattr(args, "ca", None)
    if ca:
        config.load_verify_locations(ca)
    else:
        import ssl

        config.verify_mode = ssl.CERT_NONE
    config.server_name = getattr(args, "name", None) or "localhost"
    ticket = getattr(args, "ticket", None)
    if ticket and os.path.exists(ticket) and os.path.getsize(ticket) > 0:
        with open(ticket, "rb") as f:
            config.session_ticket = pickle.load(f)
    return config


def addr_of(url):
    u = urlparse(url)
    host = u.hostname
    if host == "localhost":
        host = "127.0.0.1"
    return (host, u.port or 443), u


class Client:
    """One QUIC connection and its HTTP/3 layer over a socket of its own."""

    def __init__(self, config, addr, ticket_file=None, with_h3=True):
        self.addr = addr
        self.sock = socket.socket(
            socket.AF_INET6 if ":" in addr[0] else socket.AF_INET, socket.SOCK_DGRAM
        )
        self.sock.settimeout(0.05)

        def save(ticket):
            if ticket_file:
                with open(ticket_file, "wb") as f:
                    pickle.dump(ticket, f)

        self.quic = QuicConnection(configuration=config, session_ticket_handler=save)
        # Without: a client that speaks HTTP/3 by hand (h3_attacks.py).
        self.h3 = H3Connection(self.quic) if with_h3 else None
        self.connected = False
        self.closed = None
        self.responses = {}
        self.sent_datagrams = []
        self.quic.connect(addr, now=time.time())

    def flush(self, send=True):
        for data, _ in self.quic.datagrams_to_send(now=time.time()):
            self.sent_datagrams.append(data)
            if send:
                self.sock.sendto(data, self.addr)

    def request(self, method, url, data=None):
        u = urlparse(url)
        sid = self.quic.get_next_available_stream_id()
        path = u.path or "/"
        if u.query:
            path += "?" + u.query
        headers = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", u.netloc.encode()),
            (b":path", path.encode()),
            (b"user-agent", b"staticd-tests-aioquic"),
        ]
        if data is not None:
            headers.append((b"content-length", str(len(data)).encode()))
        self.h3.send_headers(sid, headers, end_stream=data is None)
        if data is not None:
            self.h3.send_data(sid, data.encode(), end_stream=True)
        self.responses[sid] = {"status": None, "headers": {}, "body": b"", "done": False}
        return sid

    def pump(self, until, deadline, send=True):
        """Receives and handles datagrams until `until()` or the deadline."""
        while not until() and time.time() < deadline:
            self.flush(send)
            try:
                data, _ = self.sock.recvfrom(65536)
            except socket.timeout:
                timer = self.quic.get_timer()
                if timer is not None and time.time() >= timer:
                    self.quic.handle_timer(now=time.time())
                continue
            self.quic.receive_datagram(data, self.addr, now=time.time())
            self.events()
        self.flush(send)

    def events(self):
        # A connection closed by the peer may end without a queued event.
        close = getattr(self.quic, "_close_event", None)
        if close is not None and self.closed is None:
            self.closed = close.error_code
        while True:
            event = self.quic.next_event()
            if event is None:
                return
            if isinstance(event, HandshakeCompleted):
                self.connected = True
                self.early_accepted = event.early_data_accepted
            if isinstance(event, ConnectionTerminated):
                self.closed = event.error_code
            self.on_event(event)
            if self.h3 is None:
                continue
            for h3 in self.h3.handle_event(event):
                r = self.responses.get(getattr(h3, "stream_id", None))
                if r is None:
                    continue
                if isinstance(h3, HeadersReceived):
                    for k, v in h3.headers:
                        if k == b":status":
                            r["status"] = int(v)
                        else:
                            r["headers"].setdefault(k.decode(), []).append(v.decode())
                elif isinstance(h3, DataReceived):
                    r["body"] += h3.data
                if getattr(h3, "stream_ended", False):
                    r["done"] = True


    def on_event(self, event):
        """A QUIC event, for a subclass to see."""


def cmd_get(args):
    addr, _ = addr_of(args.urls[0])
    # From the first packet: what the server took, Python's start left out.
    began = time.time()
    client = Client(configuration(args), addr, args.ticket)
    if not args.zero_rtt:
        client.pump(lambda: client.connected or client.closed is not None, time.time() + TIMEOUT)
    ids = [client.request(args.method, url, args.data) for url in args.urls]
    deadline = time.time() + args.timeout
    if args.started:
        # Tells a waiting test that the response is on its way: its headers
        # have come, so the request is in flight at the server.
        client.pump(lambda: any(client.responses[i]["status"] is not None for i in ids), deadline)
        open(args.started, "w").close()
    client.pump(lambda: all(client.responses[i]["done"] for i in ids), deadline)
    seconds = time.time() - began
    # Give the session ticket (sent after the handshake) a moment.
    if args.ticket:
        client.pump(lambda: os.path.exists(args.ticket), time.time() + 2)
    out = []
    for n, i in enumerate(ids):
        r = client.responses[i]
        if args.out:
            with open(os.path.join(args.out, str(n)), "wb") as f:
                f.write(r["body"])
        out.append(
            {"status": r["status"], "headers": r["headers"], "length": len(r["body"]), "done": r["done"]}
        )
    client.quic.close()
    client.flush()
    print(
        json.dumps(
            {"responses": out, "early_data_accepted": getattr(client, "early_accepted", None), "seconds": seconds}
        )
    )


def first_flight(args, addr):
    """A new connection's first datagrams, as the client would send them."""
    client = Client(configuration(args), addr)
    client.flush(send=False)
    return client


def cmd_flood(args):
    addr = (args.host, args.port)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # The answers to the first flights arrive while later ones are still
    # being made: room for them, and read as they come.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    counts = {"retry": 0, "other": 0}

    def receive(deadline):
        """Counts what has arrived; with a deadline, waits until then."""
        while True:
            if deadline is None:
                sock.setblocking(False)
            else:
                left = deadline - time.time()
                if left <= 0:
                    return
                sock.settimeout(left)
            try:
                data, _ = sock.recvfrom(65536)
            except (socket.timeout, BlockingIOError):
                return
            # Long header (0x80) of QUIC v1, type bits 0x30: 0x30 is Retry.
            if data[0] & 0x80 and (data[0] & 0x30) == 0x30:
                counts["retry"] += 1
            else:
                counts["other"] += 1

    sent = 0
    for _ in range(args.n):
        client = first_flight(args, addr)
        for d in client.sent_datagrams:
            sock.sendto(d, addr)
            sent += 1
        receive(None)
    receive(time.time() + 2)
    print(json.dumps({"sent": sent, **counts}))


def cmd_amplify(args):
    addr = (args.host, args.port)
    client = first_flight(args, addr)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(0.2)
    sent = 0
    for d in client.sent_datagrams:
        sock.sendto(d, addr)
        sent += len(d)
    received = 0
    datagrams = 0
    deadline = time.time() + args.seconds
    while time.time() < deadline:
        try:
            data, _ = sock.recvfrom(65536)
        except socket.timeout:
            continue
        received += len(data)
        datagrams += 1
    print(json.dumps({"sent": sent, "received": received, "datagrams": datagrams}))


def cmd_early(args):
    addr, _ = addr_of(args.url)
    config = configuration(args)
    if config.session_ticket is None:
        sys.exit("early: no session ticket in " + str(args.ticket))
    client = Client(config, addr)
    sid = client.request(args.method, args.url, args.data)
    client.flush(send=False)
    flight = list(client.sent_datagrams)
    # The first flight goes out, and the client hears what comes back but
    # never sends again: its handshake never completes.
    for d in flight:
        client.sock.sendto(d, addr)
    deadline = time.time() + args.seconds
    client.pump(lambda: client.responses[sid]["done"], deadline, send=False)
    r = client.responses[sid]
    # The same flight from another address: a replay.
    replay = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    for d in flight:
        replay.sendto(d, addr)
    time.sleep(args.seconds)
    print(
        json.dumps(
            {
                "zero_rtt_sent": len(flight) > 1 or config.session_ticket is not None,
                "status": r["status"],
                "length": len(r["body"]),
                "done": r["done"],
            }
        )
    )


def cmd_streams(args):
    """Opens N request streams at once, past the server's stream limit."""
    addr, _ = addr_of(args.url)
    client = Client(configuration(args), addr)
    client.pump(lambda: client.connected or client.closed is not None, time.time() + TIMEOUT)
    # aioquic keeps to the server's MAX_STREAMS; a hostile client does not.
    client.quic._remote_max_streams_bidi = 1 << 40
    ids = [client.request("GET", args.url) for _ in range(args.n)]
    client.pump(
        lambda: client.closed is not None or all(client.responses[i]["done"] for i in ids),
        time.time() + TIMEOUT,
    )
    done = sum(1 for i in ids if client.responses[i]["done"])
    print(json.dumps({"opened": args.n, "done": done, "closed": client.closed}))


def cmd_stall(args):
    """Asks for URL, takes its first bytes, then goes silent: reads nothing,
    acknowledges nothing, for --seconds."""
    addr, _ = addr_of(args.url)
    client = Client(configuration(args), addr)
    client.pump(lambda: client.connected or client.closed is not None, time.time() + TIMEOUT)
    sid = client.request("GET", args.url)
    client.pump(lambda: len(client.responses[sid]["body"]) > 0, time.time() + TIMEOUT)
    got = len(client.responses[sid]["body"])
    if args.started:
        # Tells a waiting test that the stream is held: its first bytes came.
        open(args.started, "w").close()
    time.sleep(args.seconds)
    print(json.dumps({"status": client.responses[sid]["status"], "received": got}))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("get")
    g.add_argument("urls", nargs="+")
    g.add_argument("--ca")
    g.add_argument("--name")
    g.add_argument("--ticket")
    g.add_argument("--zero-rtt", action="store_true")
    g.add_argument("--method", default="GET")
    g.add_argument("--data")
    g.add_argument("--out")
    g.add_argument("--started")
    g.add_argument("--timeout", type=float, default=TIMEOUT)
    f = sub.add_parser("flood")
    f.add_argument("host")
    f.add_argument("port", type=int)
    f.add_argument("n", type=int)
    a = sub.add_parser("amplify")
    a.add_argument("host")
    a.add_argument("port", type=int)
    a.add_argument("--seconds", type=float, default=3.0)
    e = sub.add_parser("early")
    e.add_argument("url")
    e.add_argument("--ca")
    e.add_argument("--name")
    e.add_argument("--ticket", required=True)
    e.add_argument("--method", default="GET")
    e.add_argument("--data")
    e.add_argument("--seconds", type=float, default=1.5)
    st = sub.add_parser("streams")
    st.add_argument("url")
    st.add_argument("n", type=int)
    st.add_argument("--ca")
    st.add_argument("--name")
    sl = sub.add_parser("stall")
    sl.add_argument("url")
    sl.add_argument("--ca")
    sl.add_argument("--name")
    sl.add_argument("--seconds", type=float, default=5.0)
    sl.add_argument("--started")
    args = p.parse_args()
    commands = {
        "get": cmd_get,
        "flood": cmd_flood,
        "amplify": cmd_amplify,
        "early": cmd_early,
        "streams": cmd_streams,
        "stall": cmd_stall,
    }
    commands[args.cmd](args)


if __name__ == "__main__":
    main()
