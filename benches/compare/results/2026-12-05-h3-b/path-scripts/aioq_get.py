#!/usr/bin/env python3
"""One HTTP/3 GET on one aioquic connection; prints bytes, times, goodput.
usage: aioq_get.py URL [--max-stream-data N] [--max-data N] [--cc reno|cubic]"""
import argparse, asyncio, ssl, time
from urllib.parse import urlparse
from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration

class Client(QuicConnectionProtocol):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.h3 = H3Connection(self._quic)
        self.done = asyncio.get_event_loop().create_future()
        self.nbytes = 0; self.t_first = None; self.t_headers = None; self.status = None
    def quic_event_received(self, event):
        for ev in self.h3.handle_event(event):
            if isinstance(ev, HeadersReceived):
                self.t_headers = time.perf_counter()
                self.status = dict(ev.headers).get(b":status")
            elif isinstance(ev, DataReceived):
                if self.t_first is None and ev.data: self.t_first = time.perf_counter()
                self.nbytes += len(ev.data)
            if getattr(ev, "stream_ended", False) and not self.done.done():
                self.done.set_result(True)

async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url"); ap.add_argument("--max-stream-data", type=int)
    ap.add_argument("--max-data", type=int); ap.add_argument("--cc", default=None)
    a = ap.parse_args()
    u = urlparse(a.url)
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, verify_mode=ssl.CERT_NONE)
    if a.max_stream_data: cfg.max_stream_data = a.max_stream_data
    if a.max_data: cfg.max_data = a.max_data
    if a.cc: cfg.congestion_control_algorithm = a.cc
    t0 = time.perf_counter()
    async with connect(u.hostname, u.port or 443, configuration=cfg, create_protocol=Client) as c:
        t_conn = time.perf_counter()
        sid = c._quic.get_next_available_stream_id()
        c.h3.send_headers(sid, [(b":method", b"GET"), (b":scheme", b"https"),
            (b":authority", u.netloc.encode()), (b":path", (u.path or "/").encode())], end_stream=True)
        t_req = time.perf_counter(); c.transmit()
        await c.done
        t_end = time.perf_counter()
    body = t_end - t_req
    print(f"status={c.status.decode()} bytes={c.nbytes} handshake={t_conn-t0:.3f}s "
          f"ttfb={c.t_first-t_req:.3f}s total_req={body:.3f}s total_incl_handshake={t_end-t0:.3f}s "
          f"goodput={c.nbytes*8/body/1e6:.1f}Mbit/s goodput_after_first_byte={c.nbytes*8/(t_end-c.t_first)/1e6:.1f}Mbit/s")

asyncio.run(main())
