#!/usr/bin/env bash
# How often a response waits for the socket, and how often the unsent queue was
# empty when it woke (SIOCOUTQNSD = 0: the kernel ran out of bytes to send).
# staticd-exp2 is c832afc (3389515's server code) with wake-counter.patch: the
# EXP_UNSENT bound of unsent-limit.patch and a counter of waits in socket::send,
# printed every 500 waits. Bound 128 KiB (the default). Usage: wakes.sh DIR
set -eu
cd "$1"
for cell in "10m.bin X-A:b" "1m.bin X-A:b" "1m.bin Connection:close" "10m.bin Connection:close"; do
  set -- $cell
  header="${2%%:*}: ${2#*:}"
  ./staticd-exp2 --root www --port 18100 --bind 127.0.0.1 --log-format off 2>exp2.err &
  sleep 0.4
  out=$(wrk -t2 -c50 -d4 -H "$header" http://127.0.0.1:18100/$1)
  kill -INT $!; wait $! || true
  reqs=$(echo "$out" | awk '/requests in/ {print $1}')
  echo "$1 [$header] c=50: $reqs responses, $(grep 'exp:' exp2.err | tail -1 | sed 's/exp: //') (counted to the last 500)"
done
