#!/usr/bin/env python3
"""Open N idle HTTP/3 connections (QUIC handshake + HTTP/3 control/QPACK streams with SETTINGS),
then hold them open. Touches READY_FILE once all are established; exits when STOP_FILE appears."""
import asyncio, os, ssl, sys
from aioquic.asyncio.client import connect
from aioquic.quic.configuration import QuicConfiguration
from aioquic.h3.connection import H3Connection, H3_ALPN

host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ready, stop = sys.argv[4], sys.argv[5]

async def one(i, opened, done):
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, verify_mode=ssl.CERT_NONE,
                            server_name="localhost", idle_timeout=600)
    async with connect(host, port, configuration=cfg, wait_connected=True) as proto:
        h3 = H3Connection(proto._quic)   # sends SETTINGS on the control stream + QPACK streams
        proto.transmit()
        opened.append(proto)
        await done.wait()

async def main():
    opened, done = [], asyncio.Event()
    tasks = []
    for i in range(n):
        tasks.append(asyncio.create_task(one(i, opened, done)))
        if i % 25 == 24:
            await asyncio.sleep(0.05)
    for _ in range(600):
        if len(opened) >= n: break
        await asyncio.sleep(0.1)
    print(f"opened {len(opened)}/{n}", flush=True)
    open(ready, "w").write(str(len(opened)))
    while not os.path.exists(stop):
        await asyncio.sleep(0.2)
    print(f"closed by the end: {sum(1 for p in opened if p._closed.is_set())}/{len(opened)}", flush=True)
    done.set()
    await asyncio.gather(*tasks, return_exceptions=True)

asyncio.run(main())
