#!/usr/bin/env python3
"""HTTP/3 attacks on staticd for tests/http3_attacks.rs, on aioquic's QUIC
state machine with HTTP/3 frames written by hand (h3.py's Client). Each
command prints one JSON object on stdout; codes are the server's: `reset`
(RESET_STREAM on the request stream), `stop` (STOP_SENDING), `closed`
(CONNECTION_CLOSE), None when it did not come.

  frame   URL --attack A [--mib N] [--conns C] [--pid P]: on each of C
          connections at once, a frame declared 2^40 bytes long (a 64 MiB
          SETTINGS for `settings`) and then N MiB of its payload, until the
          server stops it; A is `headers` (a HEADERS frame on a request
          stream), `reserved` (a reserved frame type on a request stream),
          `settings` (the control stream's SETTINGS) or `control-reserved`
          (a reserved frame type on the control stream, after SETTINGS).
          With P: the server's VmRSS (KiB) before and at most during.
  partial URL [--seconds S]: a request stream with part of a HEADERS frame,
          then QUIC PINGs every second; when the stream was reset and the
          connection closed (seconds from the first byte)
  idle    URL [--seconds S]: a connection that opens no request stream,
          with QUIC PINGs every second; when it was closed
  qpack   URL --case C: a request whose field section has a Required
          Insert Count of 5 (`ric`) or a post-base reference (`postbase`),
          staticd's dynamic table having capacity 0; what came back
"""

import argparse
import json
import os
import select
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from aioquic.quic.events import (  # noqa: E402
    ConnectionTerminated,
    PingAcknowledged,
    StopSendingReceived,
    StreamDataReceived,
    StreamReset,
)

from h3 import TIMEOUT, Client, addr_of, configuration  # noqa: E402


def varint(v):
    """A QUIC varint (RFC 9000 §16)."""
    if v < 1 << 6:
        return bytes([v])
    if v < 1 << 14:
        return (v | 0x4000).to_bytes(2, "big")
    if v < 1 << 30:
        return (v | 0x80000000).to_bytes(4, "big")
    return (v | 0xC000000000000000).to_bytes(8, "big")


def frame(ty, payload):
    return varint(ty) + varint(len(payload)) + payload


HEADERS, SETTINGS = 0x1, 0x4
# A reserved frame type (RFC 9114 §7.2.8: 0x1f * N + 0x21).
RESERVED = 0x21
HUGE = 1 << 40


def rss(pid):
    """The server's resident set, in KiB."""
    if pid is None:
        return None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


class Raw(Client):
    """A client whose HTTP/3 is written by hand; it records what the server
    does to its streams and connection."""

    def __init__(self, args, addr):
        super().__init__(configuration(args), addr, with_h3=False)
        self.reset = None
        self.stop = None
        self.fin = False
        self.data = b""
        self.pings = 0
        self.watch = None

    def on_event(self, event):
        if isinstance(event, StreamReset) and event.stream_id == self.watch:
            self.reset = event.error_code
        if isinstance(event, StopSendingReceived) and event.stream_id == self.watch:
            self.stop = event.error_code
        if isinstance(event, StreamDataReceived) and event.stream_id == self.watch:
            self.data += event.data
            self.fin = self.fin or event.end_stream
        if isinstance(event, PingAcknowledged):
            self.pings += 1

    def connect(self):
        self.pump(lambda: self.connected or self.closed is not None, time.time() + TIMEOUT)
        if not self.connected:
            sys.exit(f"no handshake (closed: {self.closed})")

    def control(self, *frames):
        """The client's control stream, with SETTINGS first (empty)."""
        sid = self.quic.get_next_available_stream_id(is_unidirectional=True)
        self.quic.send_stream_data(sid, varint(0x0) + b"".join(frames))
        return sid

    def step(self, wait):
        """Sends what is due, then handles what arrives within `wait`."""
        self.flush()
        ready, _, _ = select.select([self.sock], [], [], wait)
        if ready:
            self.receive()
        timer = self.quic.get_timer()
        if timer is not None and time.time() >= timer:
            self.quic.handle_timer(now=time.time())
        self.flush()

    def receive(self):
        self.sock.setblocking(False)
        while True:
            try:
                data, _ = self.sock.recvfrom(65536)
            except (BlockingIOError, socket.timeout):
                return
            self.quic.receive_datagram(data, self.addr, now=time.time())
            self.events()

    def unsent(self, sid):
        stream = self.quic._streams.get(sid)
        return 0 if stream is None else len(stream.sender._buffer)

    def stopped(self):
        return self.closed is not None or self.stop is not None or self.reset is not None

    def result(self):
        return {"reset": self.reset, "stop": self.stop, "closed": self.closed}


def cmd_frame(args):
    addr, u = addr_of(args.url)
    conns = [Raw(args, addr) for _ in range(args.conns)]
    for c in conns:
        c.connect()
    before = rss(args.pid)
    peak = before
    total = args.mib << 20
    block = b"\0" * (64 << 10)
    for c in conns:
        c.sent = 0
        if args.attack in ("headers", "reserved"):
            c.control(frame(SETTINGS, b""))
            c.watch = c.quic.get_next_available_stream_id()
            ty = HEADERS if args.attack == "headers" else RESERVED
            c.quic.send_stream_data(c.watch, varint(ty) + varint(HUGE))
        elif args.attack == "settings":
            c.watch = c.control(varint(SETTINGS) + varint(64 << 20))
        else:
            head = frame(SETTINGS, b"") + varint(RESERVED) + varint(HUGE)
            c.watch = c.control(head)
    deadline = time.time() + args.seconds
    while time.time() < deadline:
        going = [c for c in conns if not c.stopped() and c.sent < total]
        if not going:
            break
        for c in going:
            # Keep a little queued: aioquic sends as flow control allows.
            while c.unsent(c.watch) < (1 << 20) and c.sent < total:
                c.quic.send_stream_data(c.watch, block)
                c.sent += len(block)
        socks = [c.sock for c in conns]
        ready, _, _ = select.select(socks, [], [], 0.005)
        for c in conns:
            if c.sock in ready:
                c.receive()
            c.step(0)
        peak = max(peak or 0, rss(args.pid) or 0) if args.pid else None
    # What the server does once it has it all (or stopped it): a moment.
    settle = time.time() + 1.0
    while time.time() < settle:
        for c in conns:
            c.step(0.01)
        if args.pid:
            peak = max(peak, rss(args.pid))
    out = {
        "rss_before": before,
        "rss_peak": peak,
        "conns": [dict(c.result(), sent=c.sent, acked=c.quic._streams[c.watch].sender._buffer_start if c.watch in c.quic._streams else None) for c in conns],
    }
    for c in conns:
        c.quic.close()
        c.flush()
    print(json.dumps(out))


def cmd_partial(args):
    addr, u = addr_of(args.url)
    c = Raw(args, addr)
    c.connect()
    c.control(frame(SETTINGS, b""))
    c.watch = c.quic.get_next_available_stream_id()
    # A HEADERS frame of 100 bytes, 10 of them sent.
    c.quic.send_stream_data(c.watch, varint(HEADERS) + varint(100) + b"\0" * 10)
    start = time.time()
    reset_at = closed_at = None
    next_ping = start
    while time.time() < start + args.seconds and c.closed is None:
        if time.time() >= next_ping:
            c.quic.send_ping(int(next_ping))
            next_ping += 1.0
        c.step(0.05)
        if reset_at is None and (c.reset is not None or c.stop is not None):
            reset_at = time.time() - start
    if c.closed is not None:
        closed_at = time.time() - start
    out = dict(c.result(), reset_at=reset_at, closed_at=closed_at, pings=c.pings)
    c.quic.close()
    c.flush()
    print(json.dumps(out))


def cmd_idle(args):
    addr, u = addr_of(args.url)
    c = Raw(args, addr)
    c.connect()
    c.control(frame(SETTINGS, b""))
    start = time.time()
    next_ping = start
    while time.time() < start + args.seconds and c.closed is None:
        if time.time() >= next_ping:
            c.quic.send_ping(int(next_ping))
            next_ping += 1.0
        c.step(0.05)
    closed_at = time.time() - start if c.closed is not None else None
    print(json.dumps({"closed": c.closed, "closed_at": closed_at, "pings": c.pings}))
    c.quic.close()
    c.flush()


def literal(index, value):
    """A field line with a static name reference and a literal value."""
    value = value.encode()
    assert index < 15 and len(value) < 127
    return bytes([0x50 | index, len(value)]) + value


def cmd_qpack(args):
    addr, u = addr_of(args.url)
    c = Raw(args, addr)
    c.connect()
    c.control(frame(SETTINGS, b""))
    # Static table (RFC 9204 Appendix A): :authority 0, :path / 1,
    # :method GET 17, :scheme https 23; indexed lines are 0b11xxxxxx.
    fields = bytes([0xC0 | 17, 0xC0 | 23, 0xC0 | 1]) + literal(0, u.netloc)
    if args.case == "ric":
        # Required Insert Count 5 (encoded as 6), Base 0: only static
        # references follow, which is what h3 looked at.
        section = bytes([6, 0]) + fields
    else:
        # Required Insert Count 0, then a post-base indexed line (0001xxxx).
        section = bytes([0, 0]) + fields + bytes([0x10])
    c.watch = c.quic.get_next_available_stream_id()
    c.quic.send_stream_data(c.watch, frame(HEADERS, section), end_stream=True)
    deadline = time.time() + args.seconds
    while time.time() < deadline and c.closed is None and not c.fin and c.reset is None:
        c.step(0.05)
    # A connection close may follow a stream's end: a moment for it.
    settle = time.time() + 1.0
    while time.time() < settle and c.closed is None:
        c.step(0.05)
    out = dict(c.result(), fin=c.fin, response_bytes=len(c.data))
    c.quic.close()
    c.flush()
    print(json.dumps(out))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("frame")
    f.add_argument("url")
    f.add_argument("--attack", required=True, choices=["headers", "reserved", "settings", "control-reserved"])
    f.add_argument("--mib", type=int, default=32)
    f.add_argument("--conns", type=int, default=2)
    f.add_argument("--pid", type=int)
    f.add_argument("--seconds", type=float, default=40.0)
    pa = sub.add_parser("partial")
    pa.add_argument("url")
    pa.add_argument("--seconds", type=float, default=20.0)
    i = sub.add_parser("idle")
    i.add_argument("url")
    i.add_argument("--seconds", type=float, default=20.0)
    q = sub.add_parser("qpack")
    q.add_argument("url")
    q.add_argument("--case", required=True, choices=["ric", "postbase"])
    q.add_argument("--seconds", type=float, default=5.0)
    for sp in (f, pa, i, q):
        sp.add_argument("--ca")
        sp.add_argument("--name")
    args = p.parse_args()
    {"frame": cmd_frame, "partial": cmd_partial, "idle": cmd_idle, "qpack": cmd_qpack}[args.cmd](args)


if __name__ == "__main__":
    main()
