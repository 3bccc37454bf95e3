#!/bin/bash
# Under BBR: what the kernel says of the servers' sockets 2.5 s into h2c 1 MB load (h2load -t2 -c50 -m10):
# BBR's bandwidth estimate, pacing rate, and whether the socket is app-limited or limited by the client's window.
cd /tmp/i44/ab
setsid h2o -c h2o.conf >/dev/null 2>&1 &
setsid ./staticd-e029 --root www --port 18092 --bind 127.0.0.1 --threads 2 --log-format off >/dev/null 2>&1 &
sleep 1
for port in 18091 18092; do
  h2load -t2 -c50 -m10 -D4 http://127.0.0.1:$port/1m.bin > /dev/null & hl=$!
  sleep 2.5
  echo "== port $port ($( [ $port = 18091 ] && echo h2o || echo staticd )), $(cat /proc/sys/net/ipv4/tcp_congestion_control)"
  ss -tnio state established "( sport = :$port )" | grep -o "bw:[0-9]*bps\|pacing_rate [0-9]*bps\|app_limited\|rwnd_limited:[^ ]*" | tr '\n' ' ' | sed 's/bw:/\nbw:/g' | sed '/^$/d' | head -12
  echo
  wait $hl
done
pkill -x h2o; pkill -x staticd-e029
