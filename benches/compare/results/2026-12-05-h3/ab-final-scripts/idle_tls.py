#!/usr/bin/env python3
"""Open N idle TLS 1.3 connections (handshake complete, ALPN h2 offered, nothing else sent),
hold them open. Touches READY_FILE once all are established; exits when STOP_FILE appears."""
import os, socket, ssl, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ready, stop, alpn = sys.argv[4], sys.argv[5], sys.argv[6] if len(sys.argv) > 6 else "h2"
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
ctx.set_alpn_protocols([alpn])
socks = []
for i in range(n):
    s = socket.create_connection((host, port))
    t = ctx.wrap_socket(s, server_hostname="localhost")
    assert t.version() == "TLSv1.3"
    socks.append(t)
print(f"opened {len(socks)}/{n} alpn={socks[0].selected_alpn_protocol()}", flush=True)
open(ready, "w").write(str(len(socks)))
while not os.path.exists(stop):
    time.sleep(0.2)
# check they are still open: a closed peer shows as readable EOF
import select
r, _, _ = select.select(socks, [], [], 0)
print(f"readable at end (closed or data from server): {len(r)}", flush=True)
